package redrive_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// local-aws-sqs implements the move-task calls but copies messages rather
// than moving them: only what it does correctly is asserted (the task runs
// to completion and the messages reach the source).
func TestNativeMoveTask(t *testing.T) {
	t.Parallel()
	client := testenv.MoveTaskSQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, false, seq("native", 6, src)...)
	r := newRedriver(t, client)
	ctx := context.Background()
	q := resolve(t, r, dlq)
	// Without a destination SQS moves each message back to the queue it
	// dead-lettered from, which it knows only for messages it moved itself.
	h, err := r.StartMoveTask(ctx, q, ptr(resolve(t, r, src)), 0)
	if err != nil || h == "" {
		t.Fatalf("start: %q, %v", h, err)
	}
	var seen int
	task, err := r.WaitMoveTask(ctx, q, 100*time.Millisecond, func(redrive.MoveTask) { seen++ })
	if err != nil || task.Status != "COMPLETED" || seen == 0 {
		t.Fatalf("wait: %+v, %v", task, err)
	}
	if n := total(t, client, src); n != 6 {
		t.Fatalf("source has %d, want 6", n)
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
}

func ptr[T any](v T) *T { return &v }
