package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/producer"
)

// TestDelayedOnTheLocalStack: messages sent not before 40 s from now,
// with hops of 10 s instead of SQS's 15 minutes and 12 hours
// (producer.Config.DelayHop, consumer.Config.HoldHop), on the local
// stack's SQS: each copy is delayed 10 s, held by its visibility 10 s on
// its first receive, re-sent on its second, so each message makes two
// copies. The worker is stopped and a new one started twice meanwhile.
// Each message runs once, not before its time (and within seconds
// after), as sent; the queue's maxReceiveCount is 2 and its dead-letter
// queue stays empty. The tight timing and delays of hours are on the
// fake (internal/settle's TestDelayedAcrossRestarts).
func TestDelayedOnTheLocalStack(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, dlqURL := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30, MaxReceiveCount: 2})
	p, err := producer.New(producer.Config{Client: client, QueueURL: queueURL, DelayHop: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	due := map[string]time.Time{
		"a": start.Add(40 * time.Second),
		"b": start.Add(43 * time.Second),
		"c": start.Add(47 * time.Second),
	}
	var msgs []producer.Message
	for body, at := range due {
		msgs = append(msgs, producer.Message{ID: "id-" + body, Body: body, NotBefore: at})
	}
	firstID := map[string]string{}
	for i, r := range p.SendBatch(context.Background(), msgs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		firstID[msgs[i].Body] = r.MessageID
	}

	type run struct {
		at        time.Time
		id, sqsID string
		attempt   int
	}
	var mu sync.Mutex
	runs := map[string][]run{}
	cc := &countingClient{SQSAPI: client}
	worker := func() func() error {
		c, err := consumer.New(consumer.Config{
			Client: cc, QueueURL: queueURL, WaitTime: 2 * time.Second, HoldHop: 10 * time.Second,
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				mu.Lock()
				defer mu.Unlock()
				runs[m.Body] = append(runs[m.Body], run{time.Now(), m.ID, m.Attribute(consumer.AttrID), m.Attempt()})
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		return runConsumer(t, c)
	}
	// Two restarts: one before the first re-sends (at about 20 s), one
	// while the second copies are held.
	for _, until := range []time.Duration{15 * time.Second, 33 * time.Second} {
		stop := worker()
		time.Sleep(time.Until(start.Add(until)))
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	stop := worker()
	waitFor(t, 90*time.Second, "the delayed messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == len(due)
	})
	time.Sleep(2 * time.Second) // a second run, if any, would show by now
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for body, at := range due {
		r := runs[body]
		if len(r) != 1 {
			t.Errorf("%s ran %d times, want once", body, len(r))
			continue
		}
		if r[0].at.Before(at) || r[0].at.After(at.Add(10*time.Second)) {
			t.Errorf("%s ran %s after its time, want not before it and within seconds", body, r[0].at.Sub(at))
		}
		if r[0].id != firstID[body] || r[0].sqsID != "id-"+body || r[0].attempt != 1 {
			t.Errorf("%s: the handler saw id %q (first sent as %q), sqsonce-id %q, attempt %d", body, r[0].id, firstID[body], r[0].sqsID, r[0].attempt)
		}
	}
	if n := cc.sends.Load(); n < int64(len(due)) {
		t.Errorf("%d copies re-sent, want at least one per message", n)
	}
	if visible, inFlight := testenv.Count(t, client, dlqURL); visible+inFlight != 0 {
		t.Errorf("the dead-letter queue holds %d messages", visible+inFlight)
	}
	if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 0 {
		t.Errorf("the queue still holds %d visible + %d in flight", visible, inFlight)
	}
}
