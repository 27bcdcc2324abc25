package redrive_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// sharedDLQ makes, on a new fake, a DLQ that two standard queues a and b
// feed (maxReceiveCount 1), and returns the fake and the three URLs.
func sharedDLQ(t *testing.T) (f *sqsfake.Fake, dlq, a, b string) {
	t.Helper()
	f = sqsfake.New()
	dlq = f.AddQueue("shared-dlq", nil)
	policy := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:shared-dlq","maxReceiveCount":"1"}`}
	a = f.AddQueue("a", policy)
	b = f.AddQueue("b", policy)
	t.Cleanup(func() {
		if p := f.Problems(); len(p) > 0 {
			t.Errorf("SQS contract violations: %v", p)
		}
	})
	return f, dlq, a, b
}

// failureAttr is an sqsonce-failure attribute recording source.
func failureAttr(source string) map[string]types.MessageAttributeValue {
	b, _ := json.Marshal(deadletter.Failure{Error: "boom", Class: deadletter.ClassPermanent, SourceQueue: source, Attempts: 1,
		OriginalMessageID: "orig", FailedAt: time.Now().UTC()})
	return map[string]types.MessageAttributeValue{deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(b))}}
}

// send sends one message with attributes to url.
func send(t *testing.T, f *sqsfake.Fake, url, body string, attrs map[string]types.MessageAttributeValue) {
	t.Helper()
	if _, err := f.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
		t.Fatal(err)
	}
}

// failOnce receives every message of url once and makes it visible again,
// then receives once more: with maxReceiveCount 1, SQS moves each to the
// DLQ.
func failOnce(t *testing.T, f *sqsfake.Fake, url string) {
	t.Helper()
	ctx := context.Background()
	out, err := f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		if _, err := f.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err = f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10}); err != nil || len(out.Messages) != 0 {
		t.Fatalf("second receive: %d message(s), %v; want every message moved to the DLQ", len(out.Messages), err)
	}
}

// A producer of one source of a shared DLQ writes a source_queue naming
// the other source: neither the message SQS moved after maxReceiveCount
// (SQS's DeadLetterQueueSourceArn says where it came from) nor one sent
// straight to the DLQ (nothing attests its record) may be steered there by
// a move without a destination.
func TestSharedDLQForgedSourceIsNotFollowed(t *testing.T) {
	t.Parallel()
	f, dlqURL, a, b := sharedDLQ(t)
	// Sent to a with a record naming b, failed on a, moved by SQS.
	send(t, f, a, "moved-by-sqs", failureAttr(b))
	failOnce(t, f, a)
	// Sent straight to the DLQ with a record naming b.
	send(t, f, dlqURL, "sent-to-dlq", failureAttr(b))

	r, _ := redrive.New(redrive.Config{Client: f})
	dlq, err := r.Queue(context.Background(), "shared-dlq")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Move(context.Background(), dlq, redrive.MoveOptions{})
	if err != nil {
		t.Fatalf("move: %+v %v", sum, err)
	}
	inA, inB, left := queueBodies(f, a), queueBodies(f, b), queueBodies(f, dlqURL)
	if sum.Moved != 1 || sum.Refused != 1 || len(inA) != 1 || inA[0] != "moved-by-sqs" || len(inB) != 0 || len(left) != 1 || left[0] != "sent-to-dlq" {
		t.Fatalf("moved=%d refused=%d; a holds %q, b holds %q, the DLQ holds %q; want moved=1 refused=1, a [moved-by-sqs], b [], DLQ [sent-to-dlq]",
			sum.Moved, sum.Refused, inA, inB, left)
	}
	if !hasNoteWith(sum.Notes, "--to") {
		t.Fatalf("notes %q do not say to pass --to", sum.Notes)
	}
}

// hasNoteWith reports whether a note contains s.
func hasNoteWith(notes []string, s string) bool {
	for _, n := range notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// deadLetter sends a dead letter to dlq the way the consumers do
// (internal/settle), its failure record naming source and signed with key
// (nil: unsigned).
func deadLetter(t *testing.T, f *sqsfake.Fake, dlq, source, body string, key []byte) {
	t.Helper()
	err := settle.Send(context.Background(), f, zap.NewNop(), "test", settle.Letter{
		Msg: settle.Message{ID: "id-" + body, Body: body, ReceiveCount: 1}, Reason: "boom",
		SourceQueue: source, DLQ: dlq, Now: time.Now(), SigningKey: key,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// On a shared DLQ, a failure record signed by a consumer with the signing
// key names the queue the message goes back to; an unsigned record, or a
// signature lifted onto another body, or one checked with another key (or
// none), is refused and left in the DLQ.
func TestSignedRecordAttestsTheSource(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	for _, c := range []struct {
		name         string
		key          []byte
		moved        int
		note         string
		inA, inB     []string
		leftInTheDLQ []string
	}{
		{"no key", nil, 0, "--signing-key-env", nil, nil, []string{"evil", "to-a", "to-b", "unsigned"}},
		{"another key", []byte(strings.Repeat("j", 32)), 0, "does not verify", nil, nil, []string{"evil", "to-a", "to-b", "unsigned"}},
		{"the key", key, 2, "not signed", []string{"to-a"}, []string{"to-b"}, []string{"evil", "unsigned"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, dlqURL, a, b := sharedDLQ(t)
			deadLetter(t, f, dlqURL, a, "to-a", key)
			deadLetter(t, f, dlqURL, b, "to-b", key)
			deadLetter(t, f, dlqURL, b, "unsigned", nil)
			// A producer that read a signed dead letter copies its record
			// onto its own body.
			var signed map[string]types.MessageAttributeValue
			for _, m := range f.Messages(dlqURL) {
				if m.Body == "to-b" {
					signed = m.Attributes
				}
			}
			send(t, f, dlqURL, "evil", signed)

			r, err := redrive.New(redrive.Config{Client: f, SigningKey: c.key})
			if err != nil {
				t.Fatal(err)
			}
			dlq, _ := r.Queue(context.Background(), "shared-dlq")
			sum, err := r.Move(context.Background(), dlq, redrive.MoveOptions{})
			if err != nil {
				t.Fatalf("move: %+v %v", sum, err)
			}
			if sum.Moved != c.moved || sum.Refused != 4-c.moved || !slices.Equal(queueBodies(f, a), c.inA) || !slices.Equal(queueBodies(f, b), c.inB) ||
				!slices.Equal(queueBodies(f, dlqURL), c.leftInTheDLQ) {
				t.Fatalf("moved=%d refused=%d; a %q, b %q, DLQ %q; want moved=%d refused=%d; a %q, b %q, DLQ %q",
					sum.Moved, sum.Refused, queueBodies(f, a), queueBodies(f, b), queueBodies(f, dlqURL), c.moved, 4-c.moved, c.inA, c.inB, c.leftInTheDLQ)
			}
			if !hasNoteWith(sum.Notes, c.note) || !hasNoteWith(sum.Notes, "--to") {
				t.Fatalf("notes %q: want one with %q and --to", sum.Notes, c.note)
			}
		})
	}
	if _, err := redrive.New(redrive.Config{Client: sqsfake.New(), SigningKey: []byte("short")}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("short key: %v", err)
	}
}

// SQS's DeadLetterQueueSourceArn wins over a record, signed or not: a
// message a consumer of b dead-lettered and a producer then sent to a
// (record and all) goes back to a, where SQS says it failed. A stamp that
// names a queue which no longer feeds the DLQ is refused.
func TestSQSSourceWinsOverRecord(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	f, _, a, b := sharedDLQ(t)
	elsewhere := sqsfake.New()
	deadLetter(t, elsewhere, elsewhere.AddQueue("shared-dlq", nil), b, "replayed", key)
	send(t, f, a, "replayed", elsewhere.Messages(elsewhere.QueueURL("shared-dlq"))[0].Attributes)
	failOnce(t, f, a)
	r, _ := redrive.New(redrive.Config{Client: f, SigningKey: key})
	dlq, _ := r.Queue(context.Background(), "shared-dlq")
	sum, err := r.Move(context.Background(), dlq, redrive.MoveOptions{})
	if err != nil || sum.Moved != 1 || !slices.Equal(queueBodies(f, a), []string{"replayed"}) || len(queueBodies(f, b)) != 0 {
		t.Fatalf("moved=%d refused=%d; a %q, b %q: %v", sum.Moved, sum.Refused, queueBodies(f, a), queueBodies(f, b), err)
	}
	// a fails it again, and then stops feeding the DLQ.
	failOnce(t, f, a)
	if _, err := f.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(a), Attributes: map[string]string{"RedrivePolicy": ""}}); err != nil {
		t.Fatal(err)
	}
	sum, err = r.Move(context.Background(), dlq, redrive.MoveOptions{})
	if err != nil || sum.Moved != 0 || sum.Refused != 1 || !hasNoteWith(sum.Notes, "SQS moved message") || len(queueBodies(f, b)) != 0 {
		t.Fatalf("moved=%d refused=%d notes %q; b %q: %v", sum.Moved, sum.Refused, sum.Notes, queueBodies(f, b), err)
	}
}
