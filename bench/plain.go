package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"
)

// preload sends n messages to the queue in batches of ten, eight batches at
// a time. groups > 0 spreads them over that many FIFO groups.
func preload(ctx context.Context, client *sqs.Client, queueURL string, n, groups int, body string) error {
	return preloadGroups(ctx, client, queueURL, n, groups, func(int) string { return body })
}

// preloadWith sends n messages whose bodies bodyFunc makes.
func preloadWith(ctx context.Context, client *sqs.Client, queueURL string, n int, bodyFunc func(i int) string) error {
	return preloadGroups(ctx, client, queueURL, n, 0, bodyFunc)
}

func preloadGroups(ctx context.Context, client *sqs.Client, queueURL string, n, groups int, bodyFunc func(i int) string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for start := 0; start < n; start += 10 {
		g.Go(func() error {
			var entries []sqstypes.SendMessageBatchRequestEntry
			for i := start; i < min(start+10, n); i++ {
				e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i - start)), MessageBody: aws.String(bodyFunc(i))}
				if groups > 0 {
					e.MessageGroupId = aws.String(fmt.Sprintf("g%03d", i%groups))
					e.MessageDeduplicationId = aws.String(strconv.Itoa(i))
				}
				entries = append(entries, e)
			}
			out, err := client.SendMessageBatch(gctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
			if err != nil {
				return fmt.Errorf("preload: %w", err)
			}
			if len(out.Failed) > 0 {
				return fmt.Errorf("preload: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
			return nil
		})
	}
	return g.Wait()
}

// plainAPI is what the plain loops call: an *sqs.Client, or the bench's
// counting wrapper of one.
type plainAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// plainLoop drains n messages with the simplest correct SDK loop: pollers
// goroutines each ReceiveMessage(10) then DeleteMessageBatch. It is the
// limit a framework is measured against. It returns messages/s from the
// first receive to the last delete.
//
// It asks SQS for the attributes the consumer asks for (every message
// attribute and every system attribute: the consumer needs the receive
// count, the FIFO group and the sqsonce-id, and hands the rest to the
// handler), so that the SDK's cost of decoding them is in both; bare asks
// for none.
func plainLoop(ctx context.Context, client plainAPI, queueURL string, n, pollers int, bare bool) (rate float64, use used, err error) {
	return plainWorkLoop(ctx, client, queueURL, n, pollers, 10, bare, nil)
}

// plainWorkLoop is plainLoop with work: each poller receives up to batch
// messages, runs work for each of them at once (i counts messages from 1),
// waits for all, then deletes the batch: the textbook consumer loop. A
// failed work stops the loop with its error.
func plainWorkLoop(ctx context.Context, client plainAPI, queueURL string, n, pollers, batch int, bare bool, work func(i int) error) (rate float64, use used, err error) {
	m := readUsed()
	var deleted, next, receives, deletes atomic.Int64
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	var last atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, pollers)
	for range pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for deleted.Load() < int64(n) && ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				in := &sqs.ReceiveMessageInput{
					QueueUrl: aws.String(queueURL), MaxNumberOfMessages: int32(batch), WaitTimeSeconds: 1,
				}
				if !bare {
					in.MessageAttributeNames = []string{"All"}
					in.MessageSystemAttributeNames = []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}
				}
				out, err := client.ReceiveMessage(rctx, in)
				rcancel()
				receives.Add(1)
				if err != nil {
					continue // a lost response: the messages come back after their visibility
				}
				if len(out.Messages) == 0 {
					continue
				}
				if work != nil {
					werrs := make([]error, len(out.Messages))
					var ww sync.WaitGroup
					for j := range out.Messages {
						i := int(next.Add(1))
						ww.Go(func() { werrs[j] = work(i) })
					}
					ww.Wait()
					if err := errors.Join(werrs...); err != nil {
						errs <- fmt.Errorf("plain loop: work: %w", err)
						return
					}
				}
				entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(out.Messages))
				for i, m := range out.Messages {
					entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
				}
				dout, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
				deletes.Add(1)
				if err != nil {
					errs <- fmt.Errorf("plain loop: delete: %w", err)
					return
				}
				deleted.Add(int64(len(dout.Successful)))
				last.Store(time.Since(start).Nanoseconds())
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, used{}, err
	}
	if deleted.Load() < int64(n) {
		return 0, used{}, fmt.Errorf("plain loop: deleted %d of %d: %w", deleted.Load(), n, ctx.Err())
	}
	use = m.perMessage(n)
	use.receives, use.deletes = receives.Load(), deletes.Load()
	return float64(n) / time.Duration(last.Load()).Seconds(), use, nil
}
