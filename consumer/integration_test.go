package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// countingClient counts the SQS calls made through it, and the entries of
// batch calls.
type countingClient struct {
	consumer.SQSAPI
	receives, deleteBatches, deleteEntries, deletes, visBatches, visEntries, visSingles, sends atomic.Int64
	maxDeleteEntries                                                                           atomic.Int64
	// gotMessages counts the receives that returned a message.
	gotMessages atomic.Int64
}

func (c *countingClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.receives.Add(1)
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, o...)
	if err == nil && len(out.Messages) > 0 {
		c.gotMessages.Add(1)
	}
	return out, err
}

func (c *countingClient) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.deleteBatches.Add(1)
	n := int64(len(in.Entries))
	c.deleteEntries.Add(n)
	for {
		cur := c.maxDeleteEntries.Load()
		if n <= cur || c.maxDeleteEntries.CompareAndSwap(cur, n) {
			break
		}
	}
	return c.SQSAPI.DeleteMessageBatch(ctx, in, o...)
}

func (c *countingClient) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	c.deletes.Add(1)
	return c.SQSAPI.DeleteMessage(ctx, in, o...)
}

func (c *countingClient) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	c.visBatches.Add(1)
	c.visEntries.Add(int64(len(in.Entries)))
	return c.SQSAPI.ChangeMessageVisibilityBatch(ctx, in, o...)
}

func (c *countingClient) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	c.visSingles.Add(1)
	return c.SQSAPI.ChangeMessageVisibility(ctx, in, o...)
}

func (c *countingClient) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.sends.Add(1)
	return c.SQSAPI.SendMessage(ctx, in, o...)
}

func (c *countingClient) total() int64 {
	return c.receives.Load() + c.deleteBatches.Load() + c.deletes.Load() + c.visBatches.Load() + c.visSingles.Load() + c.sends.Load()
}

// sendN sends n messages (bodies "0".."n-1") in batches of 10.
func sendN(t *testing.T, client *sqs.Client, queueURL string, n int, group func(i int) string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 10 {
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL)}
		for j := i; j < min(i+10, n); j++ {
			e := types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprint(j))}
			if group != nil {
				e.MessageGroupId = aws.String(group(j))
				e.MessageDeduplicationId = aws.String(fmt.Sprint(j))
			}
			in.Entries = append(in.Entries, e)
		}
		out, err := client.SendMessageBatch(ctx, in)
		if err != nil {
			t.Fatalf("send batch: %v", err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("send batch: %d failed: %+v", len(out.Failed), out.Failed[0])
		}
	}
}

// runConsumer starts c.Run and returns a stop function that cancels it and
// returns Run's error.
func runConsumer(t *testing.T, c *consumer.Consumer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(60 * time.Second):
				t.Fatal("Run did not return within 60s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond every 20ms until it is true or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStandardThousandMessages(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	const n = 1000
	sendN(t, client, queueURL, n, nil)

	var mu sync.Mutex
	runs := map[string]int{}
	var handled atomic.Int64
	cc := &countingClient{SQSAPI: client}
	c, err := consumer.New(consumer.Config{
		Client:      cc,
		QueueURL:    queueURL,
		Concurrency: 32,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			runs[m.Body]++
			mu.Unlock()
			handled.Add(1)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stop := runConsumer(t, c)
	waitFor(t, 60*time.Second, "1000 messages handled", func() bool { return handled.Load() >= n })
	elapsed := time.Since(start)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if got := runs[fmt.Sprint(i)]; got != 1 {
			t.Errorf("message %d handled %d times, want 1", i, got)
		}
	}
	if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 0 {
		t.Errorf("queue still holds %d visible + %d in flight messages, want none", visible, inFlight)
	}
	if got := cc.deleteEntries.Load() + cc.deletes.Load(); got < n {
		t.Errorf("deleted %d messages, want %d", got, n)
	}
	if b := cc.deleteBatches.Load(); b > n/2 {
		t.Errorf("%d DeleteMessageBatch calls for %d messages: deletes are not batched", b, n)
	}
	t.Logf("1000 no-op messages, concurrency 32: %.0f messages/s (%s); SQS calls: %d receive, %d delete batch (%d entries, max %d per call), %d single delete, %d visibility batch, %d send; %.3f calls/message",
		n/elapsed.Seconds(), elapsed.Round(time.Millisecond), cc.receives.Load(), cc.deleteBatches.Load(), cc.deleteEntries.Load(), cc.maxDeleteEntries.Load(),
		cc.deletes.Load(), cc.visBatches.Load(), cc.sends.Load(), float64(cc.total())/n)
}
