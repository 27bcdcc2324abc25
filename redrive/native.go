package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
)

// MoveTask is one of SQS's native message move tasks (StartMessageMoveTask).
// SQS moves everything, without filter, dry run or backup; use it when
// that is what you want.
type MoveTask struct {
	// Handle identifies a running task (for cancel).
	Handle string `json:"task_handle,omitempty"`
	// Status is RUNNING, COMPLETED, CANCELLING, CANCELLED or FAILED.
	Status string `json:"status"`
	// SourceARN is the DLQ.
	SourceARN string `json:"source_arn"`
	// DestinationARN is the destination; empty means each message's
	// original source queue.
	DestinationARN string `json:"destination_arn,omitempty"`
	// MaxPerSecond is the task's rate cap; 0 lets SQS choose.
	MaxPerSecond int `json:"max_per_second,omitempty"`
	// Moved and ToMove are ApproximateNumberOfMessagesMoved and ...ToMove.
	Moved int64 `json:"moved"`
	// ToMove: see Moved.
	ToMove int64 `json:"to_move"`
	// Failure is the reason of a FAILED task.
	Failure string `json:"failure,omitempty"`
	// Started is when the task started.
	Started time.Time `json:"started"`
}

// Running reports whether the task is still going.
func (t MoveTask) Running() bool { return t.Status == "RUNNING" || t.Status == "CANCELLING" }

// StartMoveTask starts a native move task out of dlq, to the destination
// (nil: each message's original source) at up to maxPerSecond messages per
// second (0: SQS's default). It returns the task handle.
func (r *Redriver) StartMoveTask(ctx context.Context, dlq Queue, to *Queue, maxPerSecond int) (string, error) {
	if maxPerSecond < 0 || maxPerSecond > 500 {
		return "", fmt.Errorf("redrive: max per second %d is outside 0..500", maxPerSecond)
	}
	if dlq.ARN == "" {
		return "", fmt.Errorf("redrive: %s has no ARN", dlq.Name)
	}
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlq.ARN)}
	if to != nil {
		if err := kinds(dlq, *to); err != nil {
			return "", err
		}
		in.DestinationArn = aws.String(to.ARN)
	}
	if maxPerSecond > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(int32(maxPerSecond))
	}
	out, err := r.client.StartMessageMoveTask(ctx, in, sdkhttp.SQS)
	if err != nil {
		if isUnsupported(err) {
			return "", fmt.Errorf("redrive: start message move task: this endpoint does not implement message move tasks (use move instead): %w", err)
		}
		return "", fmt.Errorf("redrive: start message move task: %w", err)
	}
	return aws.ToString(out.TaskHandle), nil
}

// MoveTasks lists the most recent native move tasks of a DLQ (up to 10,
// newest first).
func (r *Redriver) MoveTasks(ctx context.Context, dlq Queue) ([]MoveTask, error) {
	out, err := r.client.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlq.ARN), MaxResults: aws.Int32(10)})
	if err != nil {
		return nil, fmt.Errorf("redrive: list message move tasks: %w", err)
	}
	tasks := make([]MoveTask, 0, len(out.Results))
	for _, t := range out.Results {
		mt := MoveTask{
			Handle: aws.ToString(t.TaskHandle), Status: aws.ToString(t.Status),
			SourceARN: aws.ToString(t.SourceArn), DestinationARN: aws.ToString(t.DestinationArn),
			Moved: t.ApproximateNumberOfMessagesMoved, ToMove: aws.ToInt64(t.ApproximateNumberOfMessagesToMove),
			Failure: aws.ToString(t.FailureReason), Started: time.UnixMilli(t.StartedTimestamp).UTC(),
		}
		if t.MaxNumberOfMessagesPerSecond != nil {
			mt.MaxPerSecond = int(*t.MaxNumberOfMessagesPerSecond)
		}
		tasks = append(tasks, mt)
	}
	return tasks, nil
}

// CancelMoveTask cancels a running native move task and returns how many
// messages it had moved.
func (r *Redriver) CancelMoveTask(ctx context.Context, handle string) (int64, error) {
	if handle == "" {
		return 0, errors.New("redrive: cancel: empty task handle")
	}
	out, err := r.client.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: aws.String(handle)}, sdkhttp.SQS)
	if err != nil {
		return 0, fmt.Errorf("redrive: cancel message move task: %w", err)
	}
	return out.ApproximateNumberOfMessagesMoved, nil
}

// WaitMoveTask polls the DLQ's newest move task every interval (default
// 1s), reporting it to progress, until it is no longer running, and returns
// its last state.
func (r *Redriver) WaitMoveTask(ctx context.Context, dlq Queue, interval time.Duration, progress func(MoveTask)) (MoveTask, error) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		tasks, err := r.MoveTasks(ctx, dlq)
		if err != nil {
			return MoveTask{}, err
		}
		if len(tasks) == 0 {
			return MoveTask{}, fmt.Errorf("redrive: %s has no move task", dlq.Name)
		}
		if progress != nil {
			progress(tasks[0])
		}
		if !tasks[0].Running() {
			return tasks[0], nil
		}
		select {
		case <-ctx.Done():
			return tasks[0], ctx.Err()
		case <-t.C:
		}
	}
}
