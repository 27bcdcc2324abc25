package sqslambdatest

import (
	"crypto/md5"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Event builds the event an SQS event source mapping passes to a
// function for msgs, received from the queue whose ARN is queueARN (with
// every system and message attribute asked for, as the mapping asks).
// Each record carries, as Lambda's do:
//
//   - messageId, receiptHandle, body and md5OfBody (computed when the
//     receive did not return it), and md5OfMessageAttributes when the
//     receive returned it;
//   - attributes: the message's system attributes as received
//     (ApproximateReceiveCount, SentTimestamp, SenderId,
//     ApproximateFirstReceiveTimestamp, and on a FIFO queue MessageGroupId,
//     MessageDeduplicationId and SequenceNumber);
//   - messageAttributes, each with its dataType and its stringValue or
//     binaryValue, and stringListValues and binaryListValues as empty lists
//     (JSON [] rather than null, as Lambda sends them);
//   - eventSource "aws:sqs", eventSourceARN queueARN, and awsRegion the
//     ARN's region.
//
// Messages are copied: the event shares no slice or map with msgs.
func Event(queueARN string, msgs []types.Message) events.SQSEvent {
	region := ""
	if parts := strings.SplitN(queueARN, ":", 6); len(parts) == 6 {
		region = parts[3]
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		body := aws.ToString(m.Body)
		r := events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   body,
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             maps.Clone(m.Attributes),
			MessageAttributes:      map[string]events.SQSMessageAttribute{},
			EventSource:            "aws:sqs",
			EventSourceARN:         queueARN,
			AWSRegion:              region,
		}
		if r.Md5OfBody == "" {
			sum := md5.Sum([]byte(body))
			r.Md5OfBody = hex.EncodeToString(sum[:])
		}
		if r.Attributes == nil {
			r.Attributes = map[string]string{}
		}
		for name, v := range m.MessageAttributes {
			a := events.SQSMessageAttribute{
				DataType:         aws.ToString(v.DataType),
				StringListValues: append([]string{}, v.StringListValues...),
				BinaryListValues: [][]byte{},
			}
			if v.StringValue != nil {
				a.StringValue = aws.String(*v.StringValue)
			}
			if v.BinaryValue != nil {
				a.BinaryValue = slices.Clone(v.BinaryValue)
			}
			for _, b := range v.BinaryListValues {
				a.BinaryListValues = append(a.BinaryListValues, slices.Clone(b))
			}
			r.MessageAttributes[name] = a
		}
		ev.Records = append(ev.Records, r)
	}
	return ev
}
