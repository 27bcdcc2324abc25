package redrive_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// newFake returns an in-process SQS (internal/sqsfake) with a standard
// queue src and its DLQ dlq, and the DLQ's URL.
func newFake(t *testing.T) (*sqsfake.Fake, string) {
	t.Helper()
	f := sqsfake.New()
	dlq := f.AddQueue("dlq", nil)
	f.AddQueue("src", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":"5"}`,
	})
	t.Cleanup(func() {
		if p := f.Problems(); len(p) > 0 {
			t.Errorf("SQS contract violations: %v", p)
		}
	})
	return f, dlq
}

// putN sends n messages b0..b<n-1> to a queue, with the attributes attrs
// gives each (nil: none).
func putN(t *testing.T, f *sqsfake.Fake, url string, n int, attrs func(i int) map[string]types.MessageAttributeValue) {
	t.Helper()
	for i := 0; i < n; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			e := types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j - i)), MessageBody: aws.String(fmt.Sprintf("b%d", j))}
			if attrs != nil {
				e.MessageAttributes = attrs(j)
			}
			entries = append(entries, e)
		}
		out, err := f.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("put: %v %v", err, out)
		}
	}
}

// TestPacing checks the rate limiter on a fake clock: 50 messages at 10/s
// take 5 s, sent in batches of 10 one second apart.
func TestPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, dlqURL := newFake(t)
		putN(t, f, dlqURL, 50, nil)
		src := f.QueueURL("src")
		r, err := redrive.New(redrive.Config{Client: f})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		dlq, _ := r.Queue(ctx, "dlq")
		start := time.Now()
		puts := f.Calls("SendMessageBatch")
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src", Rate: 10})
		if err != nil || sum.Moved != 50 {
			t.Fatalf("%+v %v", sum, err)
		}
		if n := f.Calls("SendMessageBatch") - puts; n != 5 {
			t.Fatalf("%d sends, want 5 batches of 10", n)
		}
		sent := f.Sent(src)
		for i, s := range sent {
			if want := time.Duration(i/10+1) * time.Second; s.At.Sub(start) != want {
				t.Fatalf("message %d (batch %d) sent at %s, want %s", i, i/10, s.At.Sub(start), want)
			}
		}
		// A fractional rate sends one message at a time.
		putN(t, f, dlqURL, 3, nil)
		puts = f.Calls("SendMessageBatch")
		start = time.Now()
		if sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src", Rate: 0.5}); err != nil || sum.Moved != 3 {
			t.Fatalf("%+v %v", sum, err)
		}
		sent = f.Sent(src)[50:]
		if len(sent) != 3 || f.Calls("SendMessageBatch")-puts != 3 || sent[2].At.Sub(start) != 6*time.Second {
			t.Fatalf("sends at %v", sent)
		}
	})
}

// TestHeldMessagesStayHidden checks that messages held back during a long
// move are extended, not handed out again, and visible at the end.
func TestHeldMessagesStayHidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, dlqURL := newFake(t)
		putN(t, f, dlqURL, 40, func(i int) map[string]types.MessageAttributeValue {
			if i%2 == 0 {
				return map[string]types.MessageAttributeValue{"keep": {DataType: aws.String("String"), StringValue: aws.String("1")}}
			}
			return nil
		})
		r, _ := redrive.New(redrive.Config{Client: f, VisibilityTimeout: 3 * time.Second})
		ctx := context.Background()
		dlq, _ := r.Queue(ctx, "dlq")
		flt, _ := redrive.ParseFilters("attr:keep")
		// 1 message per second: 20 s, far past the 3 s visibility timeout.
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src", Filters: flt, Rate: 1})
		if err != nil || sum.Moved != 20 || sum.Skipped != 20 || sum.Received != 40 {
			t.Fatalf("%+v %v", sum, err)
		}
		left := f.Messages(dlqURL)
		if len(left) != 20 {
			t.Fatalf("dlq has %d, want 20", len(left))
		}
		for _, m := range left {
			if m.State != sqsfake.Visible {
				t.Fatalf("held message %s is %s after the move", m.ID, m.State)
			}
			if m.ReceiveCount != 1 {
				t.Fatalf("held message %s was received %d times: its visibility was not extended", m.ID, m.ReceiveCount)
			}
		}
		if n := len(f.Messages(f.QueueURL("src"))); n != 20 {
			t.Fatalf("source has %d", n)
		}
	})
}

// A message dead-lettered again after this run moved it (a consumer that
// still fails) is left in the DLQ rather than moved around in a loop.
func TestCameBackIsNotMovedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, dlqURL := newFake(t)
		putN(t, f, dlqURL, 2, nil)
		// A "consumer" fails every moved message straight back to the DLQ.
		back := &bouncer{Fake: f, src: f.QueueURL("src"), dlq: dlqURL}
		r, _ := redrive.New(redrive.Config{Client: back})
		ctx := context.Background()
		dlq, _ := r.Queue(ctx, "dlq")
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src"})
		if err != nil || sum.Moved != 2 || sum.CameBack != 2 || sum.Skipped != 0 || len(f.Messages(dlqURL)) != 2 {
			t.Fatalf("%+v %v", sum, err)
		}
	})
}

// A DLQ of 4 whose consumer still fails: the 4 moved messages come back
// during the run as new SQS messages. The summary counts each dead letter
// once: moved 4, nothing skipped, and the copies that came back apart.
func TestCameBackCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, dlqURL := newFake(t)
		putN(t, f, dlqURL, 4, nil)
		back := &bouncer{Fake: f, src: f.QueueURL("src"), dlq: dlqURL}
		r, _ := redrive.New(redrive.Config{Client: back})
		ctx := context.Background()
		dlq, _ := r.Queue(ctx, "dlq")
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src"})
		if err != nil {
			t.Fatal(err)
		}
		if seen := sum.Moved + sum.Skipped + sum.Refused + sum.Failed; seen != 4 || sum.Received != 4 || sum.Moved != 4 {
			t.Fatalf("DLQ of 4: moved %d, skipped %d, refused %d, failed %d (sum %d), received %d; want moved 4 and a sum of 4 = received",
				sum.Moved, sum.Skipped, sum.Refused, sum.Failed, seen, sum.Received)
		}
		if sum.CameBack != 4 || len(f.Messages(dlqURL)) != 4 {
			t.Fatalf("came back %d, DLQ holds %d; want the 4 copies counted apart and left there", sum.CameBack, len(f.Messages(dlqURL)))
		}
	})
}

// bouncer sends every message sent to src on to dlq, as a failing
// consumer would (attributes kept).
type bouncer struct {
	*sqsfake.Fake
	src, dlq string
}

func (b *bouncer) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := b.Fake.SendMessageBatch(ctx, in, o...)
	if err == nil && aws.ToString(in.QueueUrl) == b.src {
		_, err = b.Fake.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(b.dlq), Entries: in.Entries}, o...)
	}
	return out, err
}

// TestQueuesAndOldestAge checks the read-only listing a console builds
// on: Queues lists by name prefix with the delayed count, and OldestAge
// samples a DLQ and hands the sample back at once.
func TestQueuesAndOldestAge(t *testing.T) {
	t.Parallel()
	f, dlqURL := newFake(t)
	f.AddQueue("other", nil)
	putN(t, f, dlqURL, 3, nil)
	ctx := context.Background()
	src := f.QueueURL("src")
	if _, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String("later"), DelaySeconds: 600}); err != nil {
		t.Fatal(err)
	}
	r, err := redrive.New(redrive.Config{Client: f, VisibilityTimeout: 45 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.VisibilityTimeout() != 45*time.Second {
		t.Fatalf("VisibilityTimeout() = %s", r.VisibilityTimeout())
	}
	qs, err := r.Queues(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Name != "src" || qs[0].Delayed != 1 || qs[0].Messages != 0 || qs[0].DeadLetterTargetARN != "arn:aws:sqs:us-east-1:123456789012:dlq" {
		t.Fatalf("Queues(s) = %+v", qs)
	}
	if all, err := r.Queues(ctx, ""); err != nil || len(all) != 3 {
		t.Fatalf("Queues() = %d queues, %v", len(all), err)
	}
	dlq, err := r.Queue(ctx, "dlq")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.OldestAge(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Messages(dlqURL) {
		if m.State != sqsfake.Visible {
			t.Fatalf("a sampled message stayed in flight: %+v", m)
		}
	}
}
