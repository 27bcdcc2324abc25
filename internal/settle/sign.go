package settle

import (
	"encoding/json"
	"errors"

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

// stepNamer is an error that names the handler's step it is the failure
// of (step.UnknownError).
type stepNamer interface {
	error
	FailureStep() string
}

// Step returns the step named by err's chain (the first error with a
// FailureStep() string method), "" when none: the dead letter's
// deadletter.Failure.Step.
func Step(err error) string {
	if s, ok := errors.AsType[stepNamer](err); ok {
		return s.FailureStep()
	}
	return ""
}

// SetStep records step in the sqsonce-failure record of a dead letter
// built by [DeadLetterInput]; an empty step changes nothing.
func SetStep(in *sqs.SendMessageInput, step string) {
	if step == "" {
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
	f.Step = truncate(step, maxStepLen)
	fj, _ := json.Marshal(f) // a Failure always marshals
	v.StringValue = aws.String(string(fj))
	in.MessageAttributes[deadletter.AttrFailure] = v
}

// maxStepLen bounds Failure.Step (step names are at most 64 bytes; a
// user's own FailureStep may return anything).
const maxStepLen = 128
