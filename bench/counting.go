package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
)

// countingSQS wraps the SQS client: it counts calls by operation, counts
// deleted messages, and notes the first receive and the last delete, so a
// run can stop once N messages are deleted and be timed the same way as
// the plain loop.
type countingSQS struct {
	*sqs.Client
	target  int64
	done    chan struct{}
	once    sync.Once
	deleted atomic.Int64

	// onDeleted, when set, is called with the running total after every
	// successful delete call.
	onDeleted func(total int64)

	mu           sync.Mutex
	calls        map[string]int64
	firstReceive time.Time
	lastDelete   time.Time
	// deleteReturned, when not nil, records when the delete call that
	// removed each message returned, by receipt handle.
	deleteReturned map[string]time.Time
}

var _ consumer.SQSAPI = (*countingSQS)(nil)

func newCounting(client *sqs.Client, target int) *countingSQS {
	return &countingSQS{Client: client, target: int64(target), done: make(chan struct{}), calls: map[string]int64{}}
}

func (c *countingSQS) count(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

func (c *countingSQS) addDeleted(n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.lastDelete = time.Now()
	c.mu.Unlock()
	total := c.deleted.Add(int64(n))
	if c.onDeleted != nil {
		c.onDeleted(total)
	}
	if total >= c.target {
		c.once.Do(func() { close(c.done) })
	}
}

// snapshot returns the call counts so far.
func (c *countingSQS) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// rate is messages deleted per second from the first receive to the last delete.
func (c *countingSQS) rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.lastDelete.Sub(c.firstReceive)
	if d <= 0 {
		return 0
	}
	return float64(c.deleted.Load()) / d.Seconds()
}

// tracking reports whether the run records when each delete returned.
func (c *countingSQS) tracking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteReturned != nil
}

// returned notes when a delete of the message with this receipt handle
// returned, if the run tracks that.
func (c *countingSQS) returned(at time.Time, receiptHandle string) {
	c.mu.Lock()
	if c.deleteReturned != nil {
		c.deleteReturned[receiptHandle] = at
	}
	c.mu.Unlock()
}

func (c *countingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.count("ReceiveMessage")
	c.mu.Lock()
	if c.firstReceive.IsZero() {
		c.firstReceive = time.Now()
	}
	c.mu.Unlock()
	return c.Client.ReceiveMessage(ctx, in, opts...)
}

func (c *countingSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	c.count("DeleteMessage")
	out, err := c.Client.DeleteMessage(ctx, in, opts...)
	if err == nil {
		c.returned(time.Now(), aws.ToString(in.ReceiptHandle))
		c.addDeleted(1)
	}
	return out, err
}

func (c *countingSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.count("DeleteMessageBatch")
	out, err := c.Client.DeleteMessageBatch(ctx, in, opts...)
	if err == nil {
		// Only the runs that track deletes pay for it: the count is
		// overhead the plain loop it is compared with does not have.
		if c.tracking() {
			now := time.Now()
			handles := make(map[string]string, len(in.Entries))
			for _, e := range in.Entries {
				handles[aws.ToString(e.Id)] = aws.ToString(e.ReceiptHandle)
			}
			for _, ok := range out.Successful {
				c.returned(now, handles[aws.ToString(ok.Id)])
			}
		}
		c.addDeleted(len(out.Successful))
	}
	return out, err
}

func (c *countingSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	c.count("ChangeMessageVisibility")
	return c.Client.ChangeMessageVisibility(ctx, in, opts...)
}

func (c *countingSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	c.count("ChangeMessageVisibilityBatch")
	c.mu.Lock()
	c.calls["ChangeMessageVisibilityBatch.entries"] += int64(len(in.Entries))
	c.mu.Unlock()
	return c.Client.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

func (c *countingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.count("SendMessage")
	return c.Client.SendMessage(ctx, in, opts...)
}

func (c *countingSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	c.count("GetQueueAttributes")
	return c.Client.GetQueueAttributes(ctx, in, opts...)
}

func (c *countingSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	c.count("GetQueueUrl")
	return c.Client.GetQueueUrl(ctx, in, opts...)
}
