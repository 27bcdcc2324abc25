package consumer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
)

// TestFitDeadLetter: the reason is cut before any attribute is dropped;
// attributes go by the documented rule; the body is never changed.
func TestFitDeadLetter(t *testing.T) {
	t.Parallel()
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	msg := &consumer.Message{ID: "m-1", Body: strings.Repeat("b", 500), Attributes: map[string]types.MessageAttributeValue{
		"alpha": str(strings.Repeat("a", 50)), "zulu": str(strings.Repeat("z", 50)), "sqsonce-trace": str("t"),
	}}
	res := consumer.Result{Outcome: consumer.OutcomeDeadLetter, Err: errors.New(strings.Repeat("é", 1500))}
	build := func() int {
		in := consumer.DeadLetterInput(msg, res, "https://sqs.test/1/q", "https://sqs.test/1/dlq", false, time.Unix(0, 0))
		dropped, fits := consumer.FitDeadLetter(in, 0)
		if !fits || len(dropped) != 0 || size(in.MessageBody, in.MessageAttributes) < 2000 {
			t.Fatalf("at SQS's own limit: dropped %v, fits %v", dropped, fits)
		}
		return size(in.MessageBody, in.MessageAttributes)
	}
	full := build()
	for _, tc := range []struct {
		max     int
		dropped string
		fits    bool
	}{
		{full, "", true},
		{1100, "", true},                         // the reason cut to 256 bytes is enough
		{900, "", true},                          // the reason cut to 64 bytes
		{850, "zulu", true},                      // then the names that sort last go first
		{790, "zulu,alpha", true},                // ...
		{760, "zulu,alpha,sqsonce-trace", true},  // other sqsonce-* names last
		{700, "zulu,alpha,sqsonce-trace", false}, // sqsonce-id and sqsonce-failure stay
	} {
		in := consumer.DeadLetterInput(msg, res, "https://sqs.test/1/q", "https://sqs.test/1/dlq", false, time.Unix(0, 0))
		dropped, fits := consumer.FitDeadLetter(in, tc.max)
		got := size(in.MessageBody, in.MessageAttributes)
		if strings.Join(dropped, ",") != tc.dropped || fits != tc.fits || (fits && got > tc.max) {
			t.Errorf("max %d: dropped %v, fits %v, %d bytes; want dropped %q, fits %v", tc.max, dropped, fits, got, tc.dropped, tc.fits)
		}
		if aws.ToString(in.MessageBody) != msg.Body || in.MessageAttributes[consumer.AttrID].StringValue == nil {
			t.Errorf("max %d: body or %s changed", tc.max, consumer.AttrID)
		}
		f, ok := consumer.ParseFailure(&consumer.Message{Attributes: in.MessageAttributes})
		if !ok || !strings.HasPrefix(f.Error, "permanent: ééé") && !strings.HasPrefix(f.Error, "ééé") {
			t.Errorf("max %d: failure %+v not valid (ok %v)", tc.max, f, ok)
		}
	}
}

func size(body *string, attrs map[string]types.MessageAttributeValue) int {
	n := len(aws.ToString(body))
	for name, v := range attrs {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}
