package consumer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// pollingSQS counts the receive calls in flight and the most at once.
type pollingSQS struct {
	*sqsfake.Fake
	in, most atomic.Int32
}

func (p *pollingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	n := p.in.Add(1)
	defer p.in.Add(-1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			break
		}
	}
	return p.Fake.ReceiveMessage(ctx, in, o...)
}

// idlePolls runs a consumer (Concurrency 32: 5 receivers by default) on an
// empty queue for 10 minutes after a first one and returns its receive
// calls in them, and the most calls in flight at once in that time.
func idlePolls(t *testing.T, cfg consumer.Config) (polls int, most int32) {
	f, q, _ := onFake(false, nil, nil)
	p := &pollingSQS{Fake: f}
	cfg.Client, cfg.Concurrency = p, 32
	cfg.Handler = consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	stop := startOnFake(t, f, q, cfg)
	time.Sleep(time.Minute)
	before := f.Calls("ReceiveMessage")
	p.most.Store(p.in.Load())
	time.Sleep(10 * time.Minute)
	polls, most = f.Calls("ReceiveMessage")-before, p.most.Load()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkProblems(t, f)
	return polls, most
}

// TestIdleQueueLongPolledByOneReceiver: receivers polling an empty queue at
// once only multiply its requests (5 per 20 s long poll before, with
// Concurrency 32). With Receivers left at its default, one polls.
func TestIdleQueueLongPolledByOneReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		polls, most := idlePolls(t, consumer.Config{})
		if polls > 31 || most != 1 {
			t.Errorf("%d receives in 10 idle minutes, %d at once; want 30 (one 20 s long poll at a time)", polls, most)
		}
	})
}

// TestReceiversSetAllPoll: a Receivers the user sets is how many poll,
// idle queue or not.
func TestReceiversSetAllPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		polls, most := idlePolls(t, consumer.Config{Receivers: 3})
		if polls < 3*30-3 || most != 3 {
			t.Errorf("%d receives in 10 idle minutes, %d at once; want 90 (3 receivers, 20 s long polls)", polls, most)
		}
	})
}

// TestBacklogBringsReceiversBack: after an idle spell (one receiver), a
// backlog brings every receiver back within a few receives, and the
// consumer drains as fast as receivers polling at once allow.
func TestBacklogBringsReceiversBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, nil, nil)
		p := &pollingSQS{Fake: f}
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ReceiveMessage" {
				return sqsfake.Fault{Delay: 20 * time.Millisecond}
			}
			return sqsfake.Fault{}
		})
		var done atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Client: p, Concurrency: 32, WaitTime: time.Second,
			Observer: &recordingObserver{onSettled: func(*consumer.Message, consumer.Result) { done.Add(1) }},
			Handler:  consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		})
		time.Sleep(time.Minute)
		if m := p.in.Load(); m != 1 {
			t.Fatalf("%d receives in flight on an idle queue, want 1", m)
		}
		p.most.Store(0)
		for i := range 2000 {
			f.Put(q, fmt.Sprint(i), "")
		}
		start := time.Now()
		for done.Load() < 2000 {
			time.Sleep(time.Millisecond)
		}
		// 5 receivers (Concurrency 32 + Prefetch 10), plus the ones of
		// receive-ahead, each 10 messages per 20 ms receive: at least
		// 2,500 messages a second once all are back.
		if most, took := p.most.Load(), time.Since(start); most < 5 || took > 2*time.Second {
			t.Errorf("2000 messages took %s with at most %d receives at once; want every receiver back (5 or more) and under 2 s", took, most)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		checkProblems(t, f)
	})
}

// TestHungReceiveDoesNotHoldTheTurn: a receive whose response never comes
// (lost on the network) is ended by its timeout, long poll + 10 s. While
// one receiver polls an idle queue, that would stop the consumer for the
// whole time: the call stops counting after its long poll + 1 s and
// another receiver polls.
func TestHungReceiveDoesNotHoldTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, nil, nil)
		var calls atomic.Int32
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ReceiveMessage" && calls.Add(1) == 20 {
				return sqsfake.Fault{Delay: time.Hour} // until the call's timeout
			}
			return sqsfake.Fault{}
		})
		var done atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 32, WaitTime: time.Second,
			Observer: &recordingObserver{onSettled: func(*consumer.Message, consumer.Result) { done.Add(1) }},
			Handler:  consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		})
		for calls.Load() < 20 {
			time.Sleep(10 * time.Millisecond)
		}
		f.Put(q, "late", "")
		start := time.Now()
		for done.Load() < 1 {
			time.Sleep(10 * time.Millisecond)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("a message sent while the only receive hung waited %s, want at most the long poll + 1 s + one poll (3 s)", took)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		checkProblems(t, f)
	})
}
