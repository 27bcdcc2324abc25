package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// askingSQS records the MaxNumberOfMessages of every receive and the most
// messages held (received, not yet settled) at once.
type askingSQS struct {
	*sqsfake.Fake
	q       string
	mu      sync.Mutex
	asks    []int32
	held    int
	maxHeld int
	// undeleted counts messages received and not yet deleted (on a FIFO
	// queue each holds its group).
	undeleted    int
	maxUndeleted int
}

func (a *askingSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out, err := a.Fake.DeleteMessageBatch(ctx, in, o...)
	if err == nil {
		a.mu.Lock()
		a.undeleted -= len(out.Successful)
		a.mu.Unlock()
	}
	return out, err
}

func (a *askingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := a.Fake.ReceiveMessage(ctx, in, o...)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asks = append(a.asks, in.MaxNumberOfMessages)
	if err == nil {
		a.held += len(out.Messages)
		a.maxHeld = max(a.maxHeld, a.held)
		a.undeleted += len(out.Messages)
		a.maxUndeleted = max(a.maxUndeleted, a.undeleted)
	}
	return out, err
}

func (a *askingSQS) settled() {
	a.mu.Lock()
	a.held--
	a.mu.Unlock()
}

func runAsking(t *testing.T, n, groups int, cfg consumer.Config) *askingSQS {
	t.Helper()
	f, q, _ := onFake(groups > 0, map[string]string{"VisibilityTimeout": "30"}, nil)
	a := &askingSQS{Fake: f, q: q}
	for i := range n {
		f.Put(q, fmt.Sprint(i), fmt.Sprintf("g%d", i%max(groups, 1)))
	}
	cfg.Client = a
	cfg.Observer = &recordingObserver{onSettled: func(*consumer.Message, consumer.Result) { a.settled() }}
	cfg.Handler = consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
		time.Sleep(10 * time.Millisecond)
		return nil
	})
	stop := startOnFake(t, f, q, cfg)
	for len(f.Messages(q)) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkProblems(t, f)
	return a
}

// TestReceivesAskForFullBatches: with a prefetch of 10 every receive asks
// for 10 messages, and never more are held than Concurrency+Prefetch; with
// the default (receive-ahead) never more than twice Concurrency.
func TestReceivesAskForFullBatches(t *testing.T) {
	for _, c := range []struct {
		prefetch, most int
	}{{10, 32 + 10}, {0, 32 + 32}} {
		t.Run(fmt.Sprintf("prefetch %d", c.prefetch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := runAsking(t, 500, 0, consumer.Config{Concurrency: 32, Prefetch: c.prefetch})
				for _, n := range a.asks {
					if n != 10 {
						t.Fatalf("a receive asked for %d messages, want 10 (asks %v)", n, a.asks)
					}
				}
				if a.maxHeld > c.most {
					t.Errorf("%d messages held at once, more than %d", a.maxHeld, c.most)
				}
				// 50 full receives, and the last ones, short, as the
				// queue empties (up to 56 in 30 runs).
				if len(a.asks) > 500/10+8 {
					t.Errorf("%d receives for 500 messages", len(a.asks))
				}
			})
		})
	}
}

// TestNoPrefetchAsksForFreeWorkers: with NoPrefetch a receiver asks only
// for messages a free worker can start, so at most Concurrency are held.
func TestNoPrefetchAsksForFreeWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := runAsking(t, 60, 0, consumer.Config{Concurrency: 3, Prefetch: consumer.NoPrefetch})
		for _, n := range a.asks {
			if n > 3 {
				t.Fatalf("a receive asked for %d messages with Concurrency 3 and no prefetch", n)
			}
		}
		if a.maxHeld > 3 {
			t.Errorf("%d messages held at once, want at most 3", a.maxHeld)
		}
	})
}

// TestFIFOSlotsHeldUntilDeleted: on a FIFO queue a message holds its group
// until it is deleted, so it holds its slot until then too: never more
// than Concurrency+Prefetch messages (groups) are out at once.
func TestFIFOSlotsHeldUntilDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := runAsking(t, 600, 60, consumer.Config{Concurrency: 8, Prefetch: 12})
		if a.maxUndeleted > 20 {
			t.Errorf("%d FIFO messages received and not yet deleted at once, more than Concurrency+Prefetch (20)", a.maxUndeleted)
		}
		if a.maxUndeleted < 10 {
			t.Errorf("at most %d FIFO messages out at once: receives did not fill the capacity", a.maxUndeleted)
		}
	})
}
