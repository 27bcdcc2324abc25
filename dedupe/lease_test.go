package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
)

// queueSQS is an in-process standard queue that behaves as SQS documents
// for what the consumer calls: a received message is invisible for the
// visibility timeout, its receipt handle changes per receive, a long poll
// waits for a message or WaitTimeSeconds, deletes and visibility changes
// name the current handle. Time is the caller's (a synctest bubble).
type queueSQS struct {
	consumer.SQSAPI // calls not listed here panic
	visibility      time.Duration

	mu   sync.Mutex
	msgs []*queued
}

type queued struct {
	id, key, body string
	visibleAt     time.Time
	receives      int
	handle        string
	deleted       bool
}

// send queues a message stamped with sqsonce-id key, visible after delay.
func (q *queueSQS) send(id, key, body string, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, &queued{id: id, key: key, body: body, visibleAt: time.Now().Add(delay)})
}

// remaining returns the ids of the messages not deleted.
func (q *queueSQS) remaining() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []string
	for _, m := range q.msgs {
		if !m.deleted {
			ids = append(ids, m.id)
		}
	}
	return ids
}

func (q *queueSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	wait := time.Duration(in.WaitTimeSeconds) * time.Second
	vis := q.visibility
	if in.VisibilityTimeout > 0 {
		vis = time.Duration(in.VisibilityTimeout) * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		q.mu.Lock()
		now := time.Now()
		out := &sqs.ReceiveMessageOutput{}
		next := deadline
		for _, m := range q.msgs {
			if m.deleted {
				continue
			}
			if m.visibleAt.After(now) {
				if m.visibleAt.Before(next) {
					next = m.visibleAt
				}
				continue
			}
			if len(out.Messages) == int(max(in.MaxNumberOfMessages, 1)) {
				break
			}
			m.receives++
			m.handle = m.id + "#" + strconv.Itoa(m.receives)
			m.visibleAt = now.Add(vis)
			out.Messages = append(out.Messages, types.Message{
				MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.handle), Body: aws.String(m.body),
				Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)},
				MessageAttributes: map[string]types.MessageAttributeValue{
					consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(m.key)},
				},
			})
		}
		q.mu.Unlock()
		if len(out.Messages) > 0 || !now.Before(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(next.Sub(now)):
		}
	}
}

// byHandle returns the message whose current receipt handle is h.
func (q *queueSQS) byHandle(h string) *queued {
	for _, m := range q.msgs {
		if m.handle == h && !m.deleted {
			return m
		}
	}
	return nil
}

func (q *queueSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.byHandle(aws.ToString(in.ReceiptHandle)); m != nil {
		m.deleted = true
	}
	return &sqs.DeleteMessageOutput{}, nil
}

func (q *queueSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		if m := q.byHandle(aws.ToString(e.ReceiptHandle)); m != nil {
			m.deleted = true
		}
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (q *queueSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.byHandle(aws.ToString(in.ReceiptHandle)); m != nil {
		m.visibleAt = time.Now().Add(time.Duration(in.VisibilityTimeout) * time.Second)
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (q *queueSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		m := q.byHandle(aws.ToString(e.ReceiptHandle))
		if m == nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true, Message: aws.String("not in flight")})
			continue
		}
		m.visibleAt = time.Now().Add(time.Duration(e.VisibilityTimeout) * time.Second)
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (q *queueSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"VisibilityTimeout": strconv.Itoa(int(q.visibility / time.Second)), "FifoQueue": "false",
	}}, nil
}

// TestLeaseOutlivesTheHeartbeatInterval: with the default lease (1 min)
// and a 5-minute visibility timeout (heartbeat every 100 s), a handler runs
// for 4 minutes while a second copy of its job (a producer's retry, same
// sqsonce-id) arrives after 90 s. The second copy must not take the key
// over from the live owner: the job's handler runs once, never twice at
// the same time, and both copies are settled.
func TestLeaseOutlivesTheHeartbeatInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queueSQS{visibility: 5 * time.Minute}
		q.send("copy-1", "job-1", "body", 0)
		q.send("copy-2", "job-1", "body", 90*time.Second)
		var (
			mu               sync.Mutex
			runs, live, most int
		)
		handler := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			mu.Lock()
			runs++
			live++
			most = max(most, live)
			mu.Unlock()
			defer func() {
				mu.Lock()
				live--
				mu.Unlock()
			}()
			select {
			case <-time.After(4 * time.Minute):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		c, err := consumer.New(consumer.Config{
			Client: q, QueueURL: "https://sqs.test/123456789012/jobs", DeadLetterQueueURL: "https://sqs.test/123456789012/jobs-dlq",
			Handler:    handler,
			Middleware: []consumer.Middleware{dedupe.Middleware(dedupe.NewMemory(dedupe.MemoryConfig{}), dedupe.Options{})},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Run until both copies are settled, or 15 minutes.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		go func() {
			for len(q.remaining()) > 0 && ctx.Err() == nil {
				time.Sleep(time.Second)
			}
			cancel()
		}()
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
		if runs != 1 || most != 1 {
			t.Fatalf("the job's handler ran %d times, %d at once: the second copy took the key over from a live owner", runs, most)
		}
		if left := q.remaining(); len(left) != 0 {
			t.Fatalf("messages not settled: %v", left)
		}
	})
}

// tokenStore remembers the token of every claim, so a test can remove a
// record from under its owner.
type tokenStore struct {
	dedupe.Store
	mu     sync.Mutex
	tokens map[string]string // key → token
}

func (s *tokenStore) Claim(ctx context.Context, key, fp string, lease time.Duration) (dedupe.Claim, error) {
	c, err := s.Store.Claim(ctx, key, fp, lease)
	if c.Status == dedupe.Claimed {
		s.mu.Lock()
		s.tokens[key] = c.Token
		s.mu.Unlock()
	}
	return c, err
}

func (s *tokenStore) token(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[key]
}

// TestHeartbeatExtendsLease: inside a consumer, the heartbeat keeps
// extending the dedupe lease of a handler that runs for three leases, and
// a lease that is lost (the record removed under its owner) cancels the
// handler with ErrLeaseLost at the next tick.
func TestHeartbeatExtendsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queueSQS{visibility: 3 * time.Second}
		q.send("m-long", "long", "a", 0)
		q.send("m-lost", "lost", "b", 0)
		store := &tokenStore{Store: dedupe.NewMemory(dedupe.MemoryConfig{}), tokens: map[string]string{}}
		ctx := context.Background()
		var (
			mu      sync.Mutex
			checks  []dedupe.Status
			lostErr error
		)
		handler := consumer.HandlerFunc(func(hctx context.Context, m *consumer.Message) error {
			switch m.Key() {
			case "long": // three leases; the lease must hold throughout
				for range 6 {
					time.Sleep(time.Second)
					c, err := store.Claim(ctx, "long", dedupe.Fingerprint(m.Body), time.Second)
					if err != nil {
						return err
					}
					mu.Lock()
					checks = append(checks, c.Status)
					mu.Unlock()
				}
			case "lost": // the record disappears: the next tick cancels it
				if err := store.Release(ctx, "lost", store.token("lost")); err != nil {
					return err
				}
				select {
				case <-hctx.Done():
					mu.Lock()
					if lostErr == nil { // the first delivery's
						lostErr = context.Cause(hctx)
					}
					mu.Unlock()
					return hctx.Err()
				case <-time.After(time.Minute):
				}
			}
			return nil
		})
		c, err := consumer.New(consumer.Config{
			Client: q, QueueURL: "https://sqs.test/123456789012/hb", DeadLetterQueueURL: "https://sqs.test/123456789012/hb-dlq",
			HeartbeatInterval: 500 * time.Millisecond,
			Handler:           handler,
			Middleware:        []consumer.Middleware{dedupe.Middleware(store, dedupe.Options{Lease: 2 * time.Second})},
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 7*time.Second)
		defer cancel()
		start := time.Now()
		if err := c.Run(rctx); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(checks) != 6 {
			t.Fatalf("%d checks, want 6", len(checks))
		}
		for i, s := range checks {
			if s != dedupe.InProgress {
				t.Fatalf("check %d at %ds: %s, want in_progress (the lease was not kept)", i, i+1, s)
			}
		}
		if !errors.Is(lostErr, consumer.ErrLeaseLost) || !errors.Is(lostErr, dedupe.ErrNotOwner) {
			t.Fatalf("lost lease cause: %v, want ErrLeaseLost wrapping ErrNotOwner", lostErr)
		}
		if d := time.Since(start); d > 7*time.Second+time.Second {
			t.Fatalf("Run took %s", d)
		}
	})
}
