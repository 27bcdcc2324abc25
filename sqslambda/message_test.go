package sqslambda_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/sqslambda"
)

func TestToMessage(t *testing.T) {
	t.Parallel()
	r := rec(fifoARN, "m1", `{"n":1}`, "g7")
	r.Attributes["ApproximateReceiveCount"] = "4"
	r.Md5OfBody = "md5"
	r.MessageAttributes = map[string]events.SQSMessageAttribute{
		consumer.AttrID: {DataType: "String", StringValue: aws.String("job-9")},
		"blob":          {DataType: "Binary", BinaryValue: []byte{0, 0xff}},
		"n":             {DataType: "Number.int", StringValue: aws.String("12")},
	}
	now := time.Unix(1700000001, 0)
	m := sqslambda.ToMessage(r, fifoURL, now)
	if m.ID != "m1" || m.Body != `{"n":1}` || m.QueueURL != fifoURL || !m.ReceivedAt.Equal(now) {
		t.Errorf("message = %+v", m)
	}
	if m.ReceiveCount != 4 || m.GroupID != "g7" || m.DeduplicationID != "dedup-m1" || !m.SentAt.Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("system attributes: count %d group %q dedup %q sent %s", m.ReceiveCount, m.GroupID, m.DeduplicationID, m.SentAt)
	}
	if m.SystemAttributes["SenderId"] != "AIDAEXAMPLE" {
		t.Errorf("system attributes %v", m.SystemAttributes)
	}
	if m.Key() != "job-9" || m.Attribute("n") != "12" || aws.ToString(m.Attributes["n"].DataType) != "Number.int" {
		t.Errorf("key %q, n %q", m.Key(), m.Attribute("n"))
	}
	if b := m.Attributes["blob"]; !slices.Equal(b.BinaryValue, []byte{0, 0xff}) || aws.ToString(b.DataType) != "Binary" {
		t.Errorf("binary attribute %+v", b)
	}
	if aws.ToString(m.Raw.ReceiptHandle) != "rh-m1" || aws.ToString(m.Raw.MD5OfBody) != "md5" {
		t.Errorf("raw %+v", m.Raw)
	}
}
