package redrive_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// On real SQS one receive returns several messages of a FIFO group (the
// local emulator returns one). When a send of one fails, nothing later of
// its group may be sent in that pass, or the group is reordered.
func TestFIFOFailedSendStopsItsGroup(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	dlq := f.AddQueue("orders-dlq.fifo", nil)
	f.AddQueue("orders.fifo", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq.fifo","maxReceiveCount":"5"}`,
	})
	for i := range 4 {
		for _, g := range []string{"a", "b"} {
			f.Put(dlq, fmt.Sprintf("%s-%d", g, i), g)
		}
	}
	// b-0 is refused every time it is sent (not the sender's fault, so it
	// is retried, and fails again).
	f.Inject(func(op string, in any) sqsfake.Fault {
		if op != "SendMessageBatch" {
			return sqsfake.Fault{}
		}
		fail := map[string]string{}
		for _, e := range in.(*sqs.SendMessageBatchInput).Entries {
			if aws.ToString(e.MessageBody) == "b-0" {
				fail[aws.ToString(e.Id)] = "InternalError"
			}
		}
		return sqsfake.Fault{FailEntries: fail}
	})
	r := newRedriver(t, f)
	ctx := context.Background()
	sum, err := r.Move(ctx, resolve(t, r, dlq), redrive.MoveOptions{To: "orders.fifo"})
	if err != nil {
		t.Fatalf("%+v %v", sum, err)
	}
	var moved []string
	for _, s := range f.Sent(f.QueueURL("orders.fifo")) {
		moved = append(moved, s.Body)
	}
	if want := []string{"a-0", "a-1", "a-2", "a-3"}; !slices.Equal(moved, want) {
		t.Fatalf("sent %v, want %v (nothing of group b after b-0 failed)", moved, want)
	}
	var left []string
	for _, m := range f.Messages(dlq) {
		left = append(left, m.Body)
	}
	if want := []string{"b-0", "b-1", "b-2", "b-3"}; !slices.Equal(left, want) {
		t.Fatalf("dlq kept %v, want %v", left, want)
	}
	if sum.Moved != 4 || sum.Failed != 1 || sum.Blocked != 3 {
		t.Fatalf("summary %+v", sum)
	}
	if p := f.Problems(); len(p) > 0 {
		t.Fatalf("SQS contract violations: %v", p)
	}
}

// With several messages of a group per receive, a move keeps each group's
// order, and a message that does not match holds back the rest of its
// group (in order) while other groups move.
func TestFIFOGroupsOnSQSSemantics(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	dlq := f.AddQueue("jobs-dlq.fifo", nil)
	src := f.AddQueue("jobs.fifo", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:jobs-dlq.fifo","maxReceiveCount":"5"}`,
	})
	for i := range 5 {
		for _, g := range []string{"a", "b", "c"} {
			f.Put(dlq, fmt.Sprintf("%s-%d", g, i), g)
		}
	}
	r := newRedriver(t, f)
	only, _ := redrive.ParseFilters("body~^(a|b)|^c-[01]$") // c-2 does not match
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{To: "jobs.fifo", Filters: only})
	if err != nil {
		t.Fatalf("%+v %v", sum, err)
	}
	byGroup := map[string][]string{}
	for _, s := range f.Sent(src) {
		byGroup[s.GroupID] = append(byGroup[s.GroupID], s.Body)
	}
	want := map[string][]string{"a": {"a-0", "a-1", "a-2", "a-3", "a-4"}, "b": {"b-0", "b-1", "b-2", "b-3", "b-4"}, "c": {"c-0", "c-1"}}
	for g, w := range want {
		if !slices.Equal(byGroup[g], w) {
			t.Errorf("group %s sent %v, want %v", g, byGroup[g], w)
		}
	}
	var left []string
	for _, m := range f.Messages(dlq) {
		left = append(left, m.Body)
	}
	if !slices.Equal(left, []string{"c-2", "c-3", "c-4"}) {
		t.Fatalf("dlq kept %v (%+v)", left, sum)
	}
	// c-3 and c-4 are never handed out: SQS locks a group while one of
	// its messages (c-2, held back) is in flight.
	if sum.Moved != 12 || sum.Received != 13 || sum.Skipped != 1 || sum.Blocked != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if p := f.Problems(); len(p) > 0 {
		t.Fatalf("SQS contract violations: %v", p)
	}
}

// A FIFO receive whose response is lost is retried with the same
// ReceiveRequestAttemptId, so SQS hands the same messages back at once
// instead of keeping their groups locked for a visibility timeout.
func TestFIFOLostReceiveIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		dlq := f.AddQueue("orders-dlq.fifo", nil)
		f.AddQueue("orders.fifo", nil)
		for i := range 3 {
			f.Put(dlq, fmt.Sprintf("a-%d", i), "a")
		}
		lost := false
		var attempts []string
		f.Inject(func(op string, in any) sqsfake.Fault {
			if op != "ReceiveMessage" {
				return sqsfake.Fault{}
			}
			attempts = append(attempts, aws.ToString(in.(*sqs.ReceiveMessageInput).ReceiveRequestAttemptId))
			if !lost {
				lost = true
				return sqsfake.Fault{LoseResponse: true}
			}
			return sqsfake.Fault{}
		})
		r := newRedriver(t, f) // 10 s visibility
		start := time.Now()
		sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{To: "orders.fifo"})
		if err != nil || sum.Moved != 3 {
			t.Fatalf("%+v %v", sum, err)
		}
		if d := time.Since(start); d >= 10*time.Second {
			t.Fatalf("the move took %s: the lost messages waited out their visibility timeout", d)
		}
		if len(attempts) < 2 || attempts[0] == "" || attempts[1] != attempts[0] {
			t.Fatalf("receive attempt ids %q: the retry must reuse the first", attempts)
		}
	})
}
