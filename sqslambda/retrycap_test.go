package sqslambda_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// TestRetryAfterBeyondTheCap: a handler asks for a retry 12 hours later,
// an hour after the message was received. SQS refuses a visibility
// timeout ending more than 12 hours after the receive, so the adapter
// must ask for what is left of the 12 hours (as the consumer does), not
// for a flat 12 hours, which SQS refuses: the message would come back at
// once instead of as late as SQS allows.
func TestRetryAfterBeyondTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, arn, _ := fakeQueues(false, map[string]string{"VisibilityTimeout": "7200"}, nil)
		f.Put(url, "later", "")
		ev := fakeEvent(t, f, url, arn, 1)
		time.Sleep(time.Hour) // the record waits an hour before its invocation
		a, err := sqslambda.New(sqslambda.Config{
			Client: f, QueueURL: url, DisableHeartbeat: true,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				return consumer.RetryAfter(errors.New("not yet"), 12*time.Hour)
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := a.Handle(context.Background(), ev)
		if len(resp.BatchItemFailures) != 1 {
			t.Fatalf("%d failures, want the retried record", len(resp.BatchItemFailures))
		}
		log := f.VisibilityLog()
		if len(log) != 1 {
			t.Fatalf("%d visibility changes, want 1", len(log))
		}
		if v := log[0]; v.Err != "" || v.Seconds != 11*60*60-60 {
			t.Errorf("visibility change of %ds (error %q), want 39540s (what is left of SQS's 12 hours, less a minute for the call), applied", v.Seconds, v.Err)
		}
		problems(t, f)
	})
}
