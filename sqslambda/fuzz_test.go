package sqslambda_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// eventJSON is a record as Lambda delivers it (from the AWS documentation's
// example event, with every kind of attribute).
const eventJSON = `{"Records":[{
 "messageId":"059f36b4-87a3-44ab-83d2-661975830a7d",
 "receiptHandle":"AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
 "body":"{\"order_id\":\"o-1\"}",
 "attributes":{"ApproximateReceiveCount":"3","SentTimestamp":"1545082649183","SenderId":"AIDAIENQZJOLO23YVJ4VO","ApproximateFirstReceiveTimestamp":"1545082649185","MessageGroupId":"g1","MessageDeduplicationId":"d1","SequenceNumber":"18849496460467696128"},
 "messageAttributes":{
  "sqsonce-id":{"stringValue":"order-1","stringListValues":[],"binaryListValues":[],"dataType":"String"},
  "raw":{"binaryValue":"/+4AgA==","stringListValues":[],"binaryListValues":[],"dataType":"Binary"},
  "n":{"stringValue":"42","dataType":"Number.int"}},
 "md5OfBody":"e4e68fb7bd0e697a0ae8f1bb342846b3",
 "md5OfMessageAttributes":"2b1b2c3d",
 "eventSource":"aws:sqs",
 "eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:my-queue.fifo",
 "awsRegion":"us-east-2"}]}`

// FuzzToMessage: any SQS event payload that decodes converts, record by
// record, to the Message the long-poll consumer would build from the same
// message, without sharing memory with the event.
func FuzzToMessage(f *testing.F) {
	f.Add([]byte(eventJSON))
	f.Add([]byte(`{"Records":[{"messageId":"m","body":"","attributes":{"ApproximateReceiveCount":"x","SentTimestamp":"-1"}}]}`))
	f.Add([]byte(`{"Records":[{"messageId":"m","messageAttributes":{"a":{"dataType":"String"},"b":{"stringListValues":["x"],"binaryListValues":["AA=="],"dataType":"String"}}}]}`))
	f.Add([]byte(`{"Records":[{}]}`))
	received := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, payload []byte) {
		var ev events.SQSEvent
		if json.Unmarshal(payload, &ev) != nil {
			return
		}
		for _, rec := range ev.Records {
			got := sqslambda.ToMessage(rec, "https://sqs.example/q", received)
			want := delivery.New(rawOf(rec), "https://sqs.example/q", received)
			if got.ID != want.ID || got.Body != want.Body || got.ReceiveCount != want.ReceiveCount ||
				!got.SentAt.Equal(want.SentAt) || got.GroupID != want.GroupID || got.DeduplicationID != want.DeduplicationID ||
				got.Key() != want.Key() || got.QueueURL != want.QueueURL || !got.ReceivedAt.Equal(received) ||
				aws.ToString(got.Raw.ReceiptHandle) != rec.ReceiptHandle {
				t.Fatalf("ToMessage(%+v) = %+v, want %+v", rec, got, want)
			}
			if n, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"]); err == nil && got.ReceiveCount != n {
				t.Fatalf("ReceiveCount %d, want %d", got.ReceiveCount, n)
			}
			if len(got.SystemAttributes) != len(rec.Attributes) {
				t.Fatalf("system attributes %v, want %v", got.SystemAttributes, rec.Attributes)
			}
			for k, v := range rec.Attributes {
				if got.SystemAttributes[k] != v {
					t.Fatalf("system attribute %s = %q, want %q", k, got.SystemAttributes[k], v)
				}
			}
			if len(got.Attributes) != len(rec.MessageAttributes) {
				t.Fatalf("%d attributes, want %d", len(got.Attributes), len(rec.MessageAttributes))
			}
			for name, a := range rec.MessageAttributes {
				v, ok := got.Attributes[name]
				if !ok || aws.ToString(v.DataType) != a.DataType || (v.StringValue == nil) != (a.StringValue == nil) ||
					aws.ToString(v.StringValue) != aws.ToString(a.StringValue) || !bytes.Equal(v.BinaryValue, a.BinaryValue) ||
					len(v.StringListValues) != len(a.StringListValues) || len(v.BinaryListValues) != len(a.BinaryListValues) {
					t.Fatalf("attribute %s = %+v, want %+v", name, v, a)
				}
				if a.StringValue != nil && got.Attribute(name) != *a.StringValue {
					t.Fatalf("Attribute(%s) = %q, want %q", name, got.Attribute(name), *a.StringValue)
				}
				// The message owns its bytes: the event may be reused.
				if len(a.BinaryValue) > 0 {
					a.BinaryValue[0]++
					if v.BinaryValue[0] == a.BinaryValue[0] {
						t.Fatalf("attribute %s shares its binary value with the event", name)
					}
					a.BinaryValue[0]--
				}
			}
		}
	})
}

// rawOf is the SDK message ReceiveMessage would have returned for rec.
func rawOf(rec events.SQSMessage) types.Message {
	raw := types.Message{
		MessageId:     aws.String(rec.MessageId),
		ReceiptHandle: aws.String(rec.ReceiptHandle),
		Body:          aws.String(rec.Body),
		Attributes:    rec.Attributes,
	}
	if len(rec.MessageAttributes) > 0 {
		raw.MessageAttributes = map[string]types.MessageAttributeValue{}
		for name, a := range rec.MessageAttributes {
			raw.MessageAttributes[name] = types.MessageAttributeValue{
				DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue,
				StringListValues: a.StringListValues, BinaryListValues: a.BinaryListValues,
			}
		}
	}
	return raw
}
