package sqslambda_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// With DeadLetterSigningKey, the failure record of a dead letter is signed
// for its body (what sqs-redrive checks with the same key); a key too short
// to sign with is refused by New with what to set.
func TestDeadLetterSigningKey(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("s", 32))
	fake := newFake()
	a := newHandler(t, fake, &scripted{}, func(c *sqslambda.Config) { c.DeadLetterSigningKey = key })
	if _, err := a.Handle(context.Background(), fake.event(rec(stdARN, "m1", "perm", ""))); err != nil {
		t.Fatal(err)
	}
	s := fake.sent()
	if len(s) != 1 {
		t.Fatalf("%d dead letters, want 1", len(s))
	}
	var f deadletter.Failure
	if err := json.Unmarshal([]byte(aws.ToString(s[0].MessageAttributes[deadletter.AttrFailure].StringValue)), &f); err != nil {
		t.Fatal(err)
	}
	if !f.Verify(key, aws.ToString(s[0].MessageBody)) {
		t.Fatalf("failure record %+v does not verify with the key", f)
	}
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	_, err := sqslambda.New(sqslambda.Config{Client: newFake(), Handler: h, DeadLetterSigningKey: []byte("short")})
	if err == nil || !strings.Contains(err.Error(), "DeadLetterSigningKey") || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("short key: %v", err)
	}
}
