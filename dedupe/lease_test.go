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
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// newQueue returns an in-process SQS (the shared fake, with AWS's
// documented semantics) holding one standard queue with the visibility
// timeout vis, and the queue's URL and its dead-letter queue's.
func newQueue(vis time.Duration) (f *sqsfake.Fake, queueURL, dlqURL string) {
	f = sqsfake.New()
	dlqURL = f.AddQueue("jobs-dlq", nil)
	queueURL = f.AddQueue("jobs", map[string]string{"VisibilityTimeout": strconv.Itoa(int(vis / time.Second))})
	return f, queueURL, dlqURL
}

// send sends body stamped with sqsonce-id key, delayed by delay.
func send(t *testing.T, f *sqsfake.Fake, queueURL, key, body string, delay time.Duration) {
	t.Helper()
	if _, err := f.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(queueURL), MessageBody: aws.String(body), DelaySeconds: int32(delay / time.Second),
		MessageAttributes: map[string]types.MessageAttributeValue{
			consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(key)},
		},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseOutlivesTheHeartbeatInterval: with the default lease (1 min)
// and a 5-minute visibility timeout (heartbeat every 100 s), a handler runs
// for 4 minutes while a second copy of its job (a producer's retry, same
// sqsonce-id) arrives after 90 s. The second copy must not take the key
// over from the live owner: the job's handler runs once, never twice at
// the same time, and both copies are settled.
func TestLeaseOutlivesTheHeartbeatInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, queueURL, dlqURL := newQueue(5 * time.Minute)
		send(t, f, queueURL, "job-1", "body", 0)
		send(t, f, queueURL, "job-1", "body", 90*time.Second) // a producer's retry
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
			Client: f, QueueURL: queueURL, DeadLetterQueueURL: dlqURL,
			Handler:    handler,
			Middleware: []consumer.Middleware{wrap(t, dedupe.NewMemory(dedupe.MemoryConfig{}), dedupe.Config{})},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Run until both copies are settled, or 15 minutes.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		go func() {
			for len(f.Messages(queueURL)) > 0 && ctx.Err() == nil {
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
		if left := f.Messages(queueURL); len(left) != 0 {
			t.Fatalf("messages not settled: %v", left)
		}
		if p := f.Problems(); len(p) > 0 {
			t.Errorf("SQS contract violations: %v", p)
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
		f, queueURL, dlqURL := newQueue(3 * time.Second)
		send(t, f, queueURL, "long", "a", 0)
		send(t, f, queueURL, "lost", "b", 0)
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
			Client: f, QueueURL: queueURL, DeadLetterQueueURL: dlqURL,
			HeartbeatInterval: 500 * time.Millisecond,
			Handler:           handler,
			Middleware:        []consumer.Middleware{wrap(t, store, dedupe.Config{Lease: 2 * time.Second})},
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
		if p := f.Problems(); len(p) > 0 {
			t.Errorf("SQS contract violations: %v", p)
		}
	})
}
