package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
)

// heartbeatCost holds 100 messages in flight with handlers slower than the
// visibility timeout and counts heartbeat requests per in-flight message
// per interval (target ≤ 0.1: one ChangeMessageVisibilityBatch per ten).
func (b *bench) heartbeatCost() ([]row, error) {
	const inFlight = 100
	const visibility, interval, hold = 3 * time.Second, time.Second, 6 * time.Second
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
	return []row{row{name: "heartbeat req per in-flight msg per interval", value: per, limit: 0.1, unit: "req",
		note: fmt.Sprintf("%d msgs held %s, interval %s: %.0f batch calls, %d entries", inFlight, hold, interval, calls, res.calls["ChangeMessageVisibilityBatch.entries"])}.with(valueAtMost(0.1))}, nil
}

// latencyObserver records send-to-settle times.
type latencyObserver struct {
	consumer.NopObserver
	mu  sync.Mutex
	lat []time.Duration
}

func (o *latencyObserver) Settled(msg *consumer.Message, _ consumer.Result) {
	if msg.SentAt.IsZero() {
		return
	}
	d := time.Since(msg.SentAt)
	o.mu.Lock()
	o.lat = append(o.lat, d)
	o.mu.Unlock()
}

// latency offers a fixed rate well below saturation and reports p50 and
// p99 from send to settle.
func (b *bench) latency() ([]row, error) {
	const rate, seconds = 200, 10
	n := rate * seconds
	q, err := b.env.queue(b.ctx, "latency", false)
	if err != nil {
		return nil, err
	}
	obs := &latencyObserver{}
	errc := make(chan error, 1)
	go func() {
		_, err := runConsumer(b.ctx, b.client, q, n, runOpts{concurrency: 32, observer: obs, waitTime: 20 * time.Second})
		errc <- err
	}()
	tick := time.NewTicker(time.Second / (rate / 10))
	defer tick.Stop()
	for sent := 0; sent < n; sent += 10 {
		<-tick.C
		if err := preload(context.Background(), b.client, q, 10, 0, "{}"); err != nil {
			return nil, err
		}
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	sort.Slice(obs.lat, func(i, j int) bool { return obs.lat[i] < obs.lat[j] })
	p := func(q float64) float64 {
		if len(obs.lat) == 0 {
			return 0
		}
		return float64(obs.lat[int(q*float64(len(obs.lat)-1))].Microseconds()) / 1000
	}
	note := fmt.Sprintf("%d msgs offered at %d msgs/s in batches of 10; SentTimestamp has ms resolution", n, rate)
	return []row{
		{name: "latency send→settle p50", value: p(0.50), unit: "ms", note: note},
		{name: "latency send→settle p99", value: p(0.99), unit: "ms"},
	}, nil
}
