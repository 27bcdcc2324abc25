package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
)

// heartbeatCost holds 100 messages in flight with handlers slower than the
// visibility timeout and counts heartbeat requests per in-flight message
// per interval (target ≤ 0.1: one ChangeMessageVisibilityBatch per ten).
func (b *bench) heartbeatCost() ([]row, error) {
	const inFlight = 100
	const visibility, interval = 3 * time.Second, time.Second
	hold := 6 * time.Second
	if b.quick {
		hold = 3 * time.Second
	}
	q, err := b.env.queue(b.ctx, "heartbeat", false)
	if err != nil {
		return nil, err
	}
	if err := preload(b.ctx, b.client, q, inFlight, 0, "{}"); err != nil {
		return nil, err
	}
	res, err := runConsumer(b.ctx, b.client, q, inFlight, runOpts{
		concurrency: inFlight, handlerDelay: hold, visibility: visibility, heartbeat: interval,
	})
	if err != nil {
		return nil, err
	}
	calls := float64(res.calls["ChangeMessageVisibilityBatch"])
	intervals := hold.Seconds() / interval.Seconds()
	per := calls / (inFlight * intervals)
	return []row{row{group: "Heartbeat", name: "heartbeat req per in-flight msg per interval", value: one(per), unit: "req",
		note: fmt.Sprintf("one run: %d msgs held %s, interval %s: %.0f batch calls, %d entries", inFlight, hold, interval, calls, res.calls["ChangeMessageVisibilityBatch.entries"])}.with(valueAtMost(0.1))}, nil
}

// latencyObserver records, by receipt handle, when each message was sent
// (from the time its body carries) and when its outcome was settled, that
// is when its delete was queued for the next batch.
type latencyObserver struct {
	consumer.NopObserver
	mu      sync.Mutex
	sent    map[string]time.Time
	settled map[string]time.Time
}

func (o *latencyObserver) Settled(msg *consumer.Message, _ consumer.Result) {
	now := time.Now()
	nanos, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(msg.Body, `{"t":`), "}"), 10, 64)
	if err != nil {
		return
	}
	h := aws.ToString(msg.Raw.ReceiptHandle)
	o.mu.Lock()
	o.sent[h] = time.Unix(0, nanos)
	o.settled[h] = now
	o.mu.Unlock()
}

// latency offers a fixed rate well below saturation and reports p50 and
// p99 from the send call to the return of the DeleteMessageBatch that
// removed the message, and to the moment its delete was queued.
func (b *bench) latency() ([]row, error) {
	const rate = 200
	seconds := 10
	if b.quick {
		seconds = 2
	}
	n := rate * seconds
	q, err := b.env.queue(b.ctx, "latency", false)
	if err != nil {
		return nil, err
	}
	obs := &latencyObserver{sent: map[string]time.Time{}, settled: map[string]time.Time{}}
	type result struct {
		res runResult
		err error
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		res, err := runConsumer(ctx, b.client, q, n, runOpts{concurrency: 32, observer: obs, waitTime: 20 * time.Second, trackDeletes: true})
		done <- result{res, err}
	}()
	tick := time.NewTicker(time.Second / (rate / 10))
	defer tick.Stop()
	body := func(int) string { return fmt.Sprintf(`{"t":%d}`, time.Now().UnixNano()) }
	for sent := 0; sent < n; sent += 10 {
		<-tick.C
		if err := preloadWith(ctx, b.client, q, 10, body); err != nil {
			cancel()
			<-done
			return nil, err
		}
	}
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var toDelete, toQueued []time.Duration
	for h, sent := range obs.sent {
		toQueued = append(toQueued, obs.settled[h].Sub(sent))
		if at, ok := r.res.deleteReturned[h]; ok {
			toDelete = append(toDelete, at.Sub(sent))
		}
	}
	if len(toDelete) < n {
		return nil, fmt.Errorf("latency: %d of %d messages have a send and a delete time", len(toDelete), n)
	}
	ms := func(d time.Duration) sample { return one(float64(d.Microseconds()) / 1000) }
	note := fmt.Sprintf("one run: %d msgs offered at %d msgs/s in batches of 10; from the send call", n, rate)
	const g = "Latency at 200 msgs/s"
	return []row{
		{group: g, name: "latency send → delete returned, p50", value: ms(percentile(toDelete, 0.50)), unit: "ms", note: note + " to the return of the DeleteMessageBatch that removed the message"},
		{group: g, name: "latency send → delete returned, p99", value: ms(percentile(toDelete, 0.99)), unit: "ms"},
		{group: g, name: "latency send → delete queued, p50", value: ms(percentile(toQueued, 0.50)), unit: "ms", note: "the same messages, to when the handler's outcome was settled and its delete queued for the next batch"},
		{group: g, name: "latency send → delete queued, p99", value: ms(percentile(toQueued, 0.99)), unit: "ms"},
	}, nil
}
