package sqslambda

import (
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// toMessage converts an event record to the consumer's Message, as if the
// long-poll consumer had received it from queueURL at receivedAt: the
// MessageId, receipt handle, body, MD5s, message attributes (string,
// number, binary and list values) and system attributes
// (ApproximateReceiveCount, SentTimestamp, MessageGroupId,
// MessageDeduplicationId, ...) are all kept.
func toMessage(rec events.SQSMessage, queueURL string, receivedAt time.Time) *sqsmsg.Message {
	raw := types.Message{
		MessageId:     aws.String(rec.MessageId),
		ReceiptHandle: aws.String(rec.ReceiptHandle),
		Body:          aws.String(rec.Body),
		Attributes:    make(map[string]string, len(rec.Attributes)),
	}
	if rec.Md5OfBody != "" {
		raw.MD5OfBody = aws.String(rec.Md5OfBody)
	}
	if rec.Md5OfMessageAttributes != "" {
		raw.MD5OfMessageAttributes = aws.String(rec.Md5OfMessageAttributes)
	}
	for k, v := range rec.Attributes {
		raw.Attributes[k] = v
	}
	if len(rec.MessageAttributes) > 0 {
		raw.MessageAttributes = make(map[string]types.MessageAttributeValue, len(rec.MessageAttributes))
		for name, a := range rec.MessageAttributes {
			v := types.MessageAttributeValue{DataType: aws.String(a.DataType)}
			if a.StringValue != nil {
				v.StringValue = aws.String(*a.StringValue)
			}
			if a.BinaryValue != nil {
				v.BinaryValue = append([]byte{}, a.BinaryValue...)
			}
			if len(a.StringListValues) > 0 {
				v.StringListValues = append([]string(nil), a.StringListValues...)
			}
			if len(a.BinaryListValues) > 0 {
				v.BinaryListValues = append([][]byte(nil), a.BinaryListValues...)
			}
			raw.MessageAttributes[name] = v
		}
	}
	return delivery.New(raw, queueURL, receivedAt)
}

// systemTime reads a system attribute holding milliseconds since the epoch.
func systemTime(msg *sqsmsg.Message, name string) (time.Time, bool) {
	ms, err := strconv.ParseInt(msg.SystemAttributes[name], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
