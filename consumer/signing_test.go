package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
)

// With DeadLetterSigningKey, the consumer signs the failure record of
// each dead letter for its body (what sqs-redrive checks with the same
// key); a key too short to sign with fails New with what to set.
func TestDeadLetterSigningKey(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("s", 32))
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(false, nil, nil)
		f.Put(q, "dead", "")
		stop := startOnFake(t, f, q, consumer.Config{
			DeadLetterSigningKey: key,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				return consumer.Permanent(errors.New("bad input"))
			}),
		})
		ok := waitUntil(time.Minute, func() bool { return len(f.Sent(dlq)) == 1 && len(f.Messages(q)) == 0 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("dead letters %d, left in the queue %d; want 1 and 0", len(f.Sent(dlq)), len(f.Messages(q)))
		}
		s := f.Sent(dlq)[0]
		var fr deadletter.Failure
		if err := json.Unmarshal([]byte(aws.ToString(s.Attributes[deadletter.AttrFailure].StringValue)), &fr); err != nil {
			t.Fatal(err)
		}
		if fr.SourceQueue != q || !fr.Verify(key, s.Body) {
			t.Fatalf("failure record %+v does not verify with the key for source %s", fr, q)
		}
		checkProblems(t, f)
	})
	f, q, _ := onFake(false, nil, nil)
	_, err := consumer.New(consumer.Config{Client: f, QueueURL: q, DeadLetterSigningKey: []byte("short"),
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })})
	if err == nil || !strings.Contains(err.Error(), "DeadLetterSigningKey") || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("short key: %v", err)
	}
}
