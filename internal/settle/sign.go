package settle

import (
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/deadletter"
)

// signFailure signs the sqsonce-failure record of a dead letter built by
// [DeadLetterInput] with key (see [deadletter.Failure.Sign]); with no key
// it does nothing. The signature does not cover the error text, so
// [FitDeadLetter] may still cut it.
func signFailure(in *sqs.SendMessageInput, key []byte) {
	if len(key) == 0 {
		return
	}
	v, ok := in.MessageAttributes[deadletter.AttrFailure]
	if !ok {
		return
	}
	var f deadletter.Failure
	if json.Unmarshal([]byte(aws.ToString(v.StringValue)), &f) != nil {
		return
	}
	f.Sign(key, aws.ToString(in.MessageBody))
	fj, _ := json.Marshal(f) // a Failure always marshals
	v.StringValue = aws.String(string(fj))
	in.MessageAttributes[deadletter.AttrFailure] = v
}
