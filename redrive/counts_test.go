package redrive_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// garbledCounts is an SQS whose approximate message counts are not
// numbers (a proxy or an emulator that answers with text).
type garbledCounts struct{ *sqsfake.Fake }

func (g garbledCounts) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	out, err := g.Fake.GetQueueAttributes(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	for _, name := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		if _, ok := out.Attributes[string(name)]; ok {
			out.Attributes[string(name)] = "n/a"
		}
	}
	return out, nil
}

// TestMalformedCountIsUnknown checks that a queue count SQS returns as
// something other than a number is reported as unknown, not taken as 0:
// the queue does not look empty, and a move does not conclude that no
// message is in flight elsewhere — it waits for such messages as it does
// when the count says so, and says why in a note.
func TestMalformedCountIsUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, dlqURL := newFake(t)
		putN(t, f, dlqURL, 3, nil)
		// Another reader holds one message for 5 s.
		if out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL), VisibilityTimeout: 5}); err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v %v", out, err)
		}
		r, err := redrive.New(redrive.Config{Client: garbledCounts{f}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		dlq, err := r.Queue(ctx, "dlq")
		if err != nil {
			t.Fatal(err)
		}
		if dlq.Messages != -1 || dlq.InFlight != -1 {
			t.Errorf("Messages, InFlight = %d, %d; want %d (unknown) for counts that are not numbers", dlq.Messages, dlq.InFlight, -1)
		}
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src"})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Moved != 3 {
			t.Errorf("moved %d, want 3: the message held elsewhere was not waited for", sum.Moved)
		}
		if !hasNote(sum.Notes, "is not a number") {
			t.Errorf("notes %q do not say the in-flight count could not be read", sum.Notes)
		}
		if n := len(f.Messages(dlqURL)); n != 0 {
			t.Errorf("dlq has %d messages left", n)
		}
	})
}

func hasNote(notes []string, s string) bool {
	for _, n := range notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
