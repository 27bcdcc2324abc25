package sqsfake

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

type moveTask struct {
	handle, source, dest string // dest "" = each message's source queue
	perSecond            *int32
	started              time.Time
	moved, toMove        int64
}

// StartMessageMoveTask moves the visible messages of a dead-letter queue
// to DestinationArn, or each back to the queue it was moved from by a
// RedrivePolicy. Unlike SQS the move completes within the call, so the task
// is COMPLETED when ListMessageMoveTasks first sees it; messages without a
// known source and no DestinationArn stay in the DLQ. The source must be a
// dead-letter queue of some queue (InvalidParameterValue otherwise).
func (f *Fake) StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	ft, err := f.begin(ctx, "StartMessageMoveTask", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, err := f.startMoveTask(in)
	f.mu.Unlock()
	return finish(ctx, "StartMessageMoveTask", ft, out, err)
}

func (f *Fake) startMoveTask(in *sqs.StartMessageMoveTaskInput) (*sqs.StartMessageMoveTaskOutput, error) {
	src := f.queueByARN(aws.ToString(in.SourceArn))
	if src == nil {
		return nil, &types.ResourceNotFoundException{Message: aws.String("The resource that you specified for the SourceArn parameter doesn't exist.")}
	}
	isDLQ := false
	for _, q := range f.queues {
		if arn, _ := q.redrive(); arn == src.arn {
			isDLQ = true
		}
	}
	if !isDLQ {
		return nil, invalidParameter("Source queue must be configured as a Dead Letter Queue.")
	}
	var dest *queue
	if in.DestinationArn != nil {
		if dest = f.queueByARN(*in.DestinationArn); dest == nil {
			return nil, &types.ResourceNotFoundException{Message: aws.String("The resource that you specified for the DestinationArn parameter doesn't exist.")}
		}
	}
	now := time.Now()
	src.expire(now)
	t := &moveTask{handle: fmt.Sprintf("task-%d", f.nextSeq()), source: src.arn, dest: aws.ToString(in.DestinationArn),
		perSecond: in.MaxNumberOfMessagesPerSecond, started: now}
	for i := 0; i < len(src.msgs); {
		m := src.msgs[i]
		to := dest
		if to == nil {
			to = f.queues[m.origin]
		}
		if m.state(now) != Visible || to == nil {
			i++
			continue
		}
		t.toMove++
		src.msgs = slices.Delete(src.msgs, i, i+1)
		f.moveTo(src, to, m, now)
		t.moved++
	}
	src.tasks = append(src.tasks, t)
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: aws.String(t.handle)}, nil
}

// ListMessageMoveTasks lists a source queue's move tasks, most recent first
// (MaxResults 1 to 10, default 1).
func (f *Fake) ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, _ ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error) {
	ft, err := f.begin(ctx, "ListMessageMoveTasks", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.ListMessageMoveTasksOutput
	src := f.queueByARN(aws.ToString(in.SourceArn))
	max := int(aws.ToInt32(in.MaxResults))
	switch {
	case src == nil:
		err = &types.ResourceNotFoundException{Message: aws.String("The resource that you specified for the SourceArn parameter doesn't exist.")}
	case in.MaxResults != nil && (max < 1 || max > 10):
		err = invalidParameter("Value %d for parameter MaxResults is invalid. Reason: Must be between 1 and 10.", max)
	default:
		if in.MaxResults == nil {
			max = 1
		}
		out = &sqs.ListMessageMoveTasksOutput{Results: []types.ListMessageMoveTasksResultEntry{}}
		for i := len(src.tasks) - 1; i >= 0 && len(out.Results) < max; i-- {
			t := src.tasks[i]
			e := types.ListMessageMoveTasksResultEntry{
				ApproximateNumberOfMessagesMoved:  t.moved,
				ApproximateNumberOfMessagesToMove: aws.Int64(t.toMove),
				MaxNumberOfMessagesPerSecond:      t.perSecond,
				SourceArn:                         aws.String(t.source),
				StartedTimestamp:                  t.started.UnixMilli(),
				Status:                            aws.String("COMPLETED"),
			}
			if t.dest != "" {
				e.DestinationArn = aws.String(t.dest)
			}
			out.Results = append(out.Results, e)
		}
	}
	f.mu.Unlock()
	return finish(ctx, "ListMessageMoveTasks", ft, out, err)
}

// CancelMessageMoveTask fails as SQS does for a task that is not running:
// the fake's tasks complete within StartMessageMoveTask.
func (f *Fake) CancelMessageMoveTask(ctx context.Context, in *sqs.CancelMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.CancelMessageMoveTaskOutput, error) {
	ft, err := f.begin(ctx, "CancelMessageMoveTask", in)
	if err != nil {
		return nil, err
	}
	err = &types.ResourceNotFoundException{Message: aws.String("Task does not exist or is not running: " + aws.ToString(in.TaskHandle))}
	return finish[*sqs.CancelMessageMoveTaskOutput](ctx, "CancelMessageMoveTask", ft, nil, err)
}
