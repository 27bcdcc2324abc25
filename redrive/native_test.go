package redrive_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// TestNativeMoveTask runs a native move task on local-aws-sqs, which
// implements the move-task calls. What it shows, and is asserted: the task
// runs to COMPLETED with its source, destination and rate cap recorded,
// counts every message as moved, empties the DLQ and delivers each message
// to the destination with its body and attributes.
//
// What it cannot show, and is not asserted: that SQS paces the task at the
// rate cap (the emulator moves at once, and wall-clock rates are not
// asserted here); a move without a destination back to each message's
// original source (SQS knows that only for messages its own
// maxReceiveCount moved; the emulator moves none — see the last step);
// cancelling a running task (the emulator's tasks finish before a cancel
// can reach them), so only the refusal to cancel a finished task is
// checked.
func TestNativeMoveTask(t *testing.T) {
	t.Parallel()
	client := testenv.MoveTaskSQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, false, seq("native", 6, src)...)
	r := newRedriver(t, client)
	ctx := context.Background()
	q := resolve(t, r, dlq)
	srcQ := resolve(t, r, src)
	h, err := r.StartMoveTask(ctx, q, &srcQ, 3)
	if err != nil || h == "" {
		t.Fatalf("start: %q, %v", h, err)
	}
	var seen int
	task, err := r.WaitMoveTask(ctx, q, 100*time.Millisecond, func(redrive.MoveTask) { seen++ })
	if err != nil || task.Status != "COMPLETED" || seen == 0 {
		t.Fatalf("wait: %+v, %v", task, err)
	}
	if task.SourceARN != q.ARN || task.DestinationARN != srcQ.ARN || task.MaxPerSecond != 3 || task.Moved != 6 || task.ToMove != 6 {
		t.Fatalf("task %+v", task)
	}
	if n := total(t, client, dlq); n != 0 {
		t.Fatalf("dlq has %d after the move, want 0", n)
	}
	moved := drain(t, client, src)
	if got, want := bodies(moved), bodyList(seq("native", 6, src)); !slices.Equal(got, want) {
		t.Fatalf("source got %v, want %v", got, want)
	}
	for _, m := range moved {
		if aws.ToString(m.MessageAttributes[consumer.AttrID].StringValue) == "" || m.MessageAttributes[deadletter.AttrFailure].StringValue == nil {
			t.Fatalf("message %s lost its attributes: %v", aws.ToString(m.MessageId), m.MessageAttributes)
		}
	}
	tasks, err := r.MoveTasks(ctx, q)
	if err != nil || len(tasks) == 0 || tasks[0].SourceARN != q.ARN {
		t.Fatalf("status: %+v, %v", tasks, err)
	}
	if _, err := r.CancelMoveTask(ctx, h); err == nil {
		t.Fatal("cancelling a completed task must fail")
	}
	if _, err := r.CancelMoveTask(ctx, ""); err == nil {
		t.Fatal("cancel with an empty handle must fail")
	}
	// Without a destination the emulator moves only messages whose origin
	// it recorded: these were sent to the DLQ directly, so none moves.
	putDead(t, client, dlq, false, seq("direct", 2, src)...)
	if _, err := r.StartMoveTask(ctx, q, nil, 0); err != nil {
		t.Fatalf("start without destination: %v", err)
	}
	task, err = r.WaitMoveTask(ctx, q, 100*time.Millisecond, nil)
	if err != nil || task.DestinationARN != "" || total(t, client, src) != 0 {
		t.Fatalf("without destination: %+v %v, source has %d", task, err, total(t, client, src))
	}
}
