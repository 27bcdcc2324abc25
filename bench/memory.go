package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sqsonce/sqsonce/consumer"
)

// liveHeap is the bytes of heap still reachable: HeapAlloc right after a
// forced collection. Unlike a sampled HeapInuse it does not move with GC
// pacing, so growth between two points is retention.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// markedLive is the heap a forced collection marked live
// (/gc/heap/live:bytes). While the consumer runs it is the steadier
// figure: HeapAlloc also counts what the consumer allocated while the
// collection ran, which moved it by up to 0.6 MiB between checkpoints
// against 0.2 MiB for this one.
func markedLive() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// rssKiB is the process's resident set size now (VmRSS), 0 when unknown.
func rssKiB() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// checkpoints is how many fixed points a memory run samples: after every
// twentieth of its messages.
const checkpoints = 20

// memRun is what one memory run measured.
type memRun struct {
	points []float64 // marked-live heap in bytes after k/20 of the messages, k = 1..20
	end    float64   // live heap in bytes after the consumer returned
	rss    float64   // KiB after the run
}

// growthPerMessage is the least-squares slope of the live heap over the
// fixed points, in bytes per message: a leak of a few bytes per message
// shows over 200,000 messages, while one point's noise (the messages in
// flight at that moment) is spread over the whole run.
func growthPerMessage(points []float64, n int) float64 {
	if len(points) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for k, y := range points {
		x := float64(k+1) * float64(n) / float64(len(points))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	m := float64(len(points))
	return (m*sxy - sx*sy) / (m*sxx - sx*sx)
}

// memoryRun drains n messages through one consumer, taking the marked-live
// heap after every twentieth of them and after the consumer returned. h
// replaces the no-op handler when not nil (a test leaks memory with it).
func (b *bench) memoryRun(n int, h consumer.Handler) (memRun, error) {
	q, err := b.env.queue(b.ctx, "memory", false)
	if err != nil {
		return memRun{}, err
	}
	if err := preload(b.ctx, b.client, q, n, 0, "{}"); err != nil {
		return memRun{}, err
	}
	liveHeap()
	points := make([]float64, checkpoints)
	reached := make(chan int, checkpoints)
	var next atomic.Int64
	next.Store(1)
	onDeleted := func(total int64) {
		for {
			k := next.Load()
			if k > checkpoints || total < k*int64(n)/checkpoints {
				return
			}
			if next.CompareAndSwap(k, k+1) {
				reached <- int(k)
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for k := range reached {
			points[k-1] = float64(markedLive())
		}
	})
	_, err = runConsumer(b.ctx, b.client, q, n, runOpts{concurrency: 32, onDeleted: onDeleted, handler: h})
	close(reached)
	wg.Wait()
	if err != nil {
		return memRun{}, err
	}
	if next.Load() <= checkpoints {
		return memRun{}, fmt.Errorf("memory: reached %d of %d checkpoints", next.Load()-1, checkpoints)
	}
	return memRun{points: points, end: float64(liveHeap()), rss: float64(rssKiB())}, nil
}

// memory drains 20,000 then 200,000 messages (2n and 20n) through one
// consumer each, taking the live heap at fixed points and at the end, and
// the RSS; then holds 1 MB of bodies in flight.
func (b *bench) memory() ([]row, error) {
	small, large := 2*b.n, 20*b.n
	s, err := b.memoryRun(small, nil)
	if err != nil {
		return nil, err
	}
	l, err := b.memoryRun(large, nil)
	if err != nil {
		return nil, err
	}
	bodies, err := b.bodiesInFlight()
	if err != nil {
		return nil, err
	}
	const mib = 1 << 20
	pts := sample(l.points)
	const g = "Memory"
	return []row{
		row{group: g, name: fmt.Sprintf("live heap growth per message, %s msgs", thousands(int64(large))), value: one(growthPerMessage(l.points, large)), unit: "B/msg",
			note: fmt.Sprintf("one run; least-squares slope of the heap a forced GC marked live after each twentieth of the messages: %.2f MiB at the first, %.2f at the last, %.2f–%.2f overall", pts[0]/mib, pts[len(pts)-1]/mib, pts.lo()/mib, pts.hi()/mib)}.with(valueAtMost(1)),
		row{group: g, name: fmt.Sprintf("live heap growth per message, %s msgs", thousands(int64(small))), value: one(growthPerMessage(s.points, small)), unit: "B/msg",
			note: "one run; the same slope over the smaller run (noisier: fewer messages)"},
		{group: g, name: fmt.Sprintf("live heap after the run, %s msgs", thousands(int64(small))), value: one(s.end / mib), unit: "MiB",
			note: "HeapAlloc after a forced GC once the consumer returned"},
		row{group: g, name: fmt.Sprintf("live heap after the run, %s msgs", thousands(int64(large))), value: one(l.end / mib), limit: one(s.end / mib), unit: "MiB",
			note: "limit: the smaller run's"}.with(atMost(1.1)),
		{group: g, name: fmt.Sprintf("RSS after %s msgs", thousands(int64(small))), value: one(s.rss / 1024), unit: "MiB"},
		row{group: g, name: fmt.Sprintf("RSS after %s msgs", thousands(int64(large))), value: one(l.rss / 1024), limit: one(s.rss / 1024), unit: "MiB",
			note: "limit: RSS after the smaller run"}.with(atMost(1.1)),
		{group: g, name: "live heap held for 1 MB of bodies in flight", value: one(bodies / mib), limit: one(float64(100*(10<<10)) / mib), unit: "MiB",
			note: "100 × 10 KiB bodies held by handlers: live heap then minus before the run; limit: the bodies' own size"},
	}, nil
}

// bodiesInFlight is the live heap that 100 in-flight messages of 10 KiB
// hold: measured once every handler has started, before any returns.
func (b *bench) bodiesInFlight() (float64, error) {
	const count = 100
	q, err := b.env.queue(b.ctx, "memory-bodies", false)
	if err != nil {
		return 0, err
	}
	if err := preload(b.ctx, b.client, q, count, 0, strings.Repeat("x", 10<<10)); err != nil {
		return 0, err
	}
	var started atomic.Int64
	all := make(chan struct{})
	release := make(chan struct{})
	h := consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Message) error {
		if started.Add(1) == count {
			close(all)
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	before := liveHeap()
	errc := make(chan error, 1)
	go func() {
		_, err := runConsumer(b.ctx, b.client, q, count, runOpts{concurrency: count, handler: h})
		errc <- err
	}()
	var held uint64
	select {
	case <-all:
		held = liveHeap()
		close(release)
	case err := <-errc:
		return 0, fmt.Errorf("bodies in flight: consumer stopped before %d handlers started: %v", count, err)
	}
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(held) - float64(before), nil
}
