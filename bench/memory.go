package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// memStats samples the Go heap while a run goes on and keeps the peak.
type memStats struct {
	peakHeap atomic.Uint64
	stop     chan struct{}
	done     chan struct{}
}

func sampleMemory() *memStats {
	m := &memStats{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > m.peakHeap.Load() {
				m.peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memStats) finish() uint64 {
	close(m.stop)
	<-m.done
	return m.peakHeap.Load()
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

// memory drains 20,000 then 200,000 messages (scaled with -n) through one
// consumer each and compares the peak heap and the RSS after each, then
// holds 1 MB of bodies in flight.
func (b *bench) memory() ([]row, error) {
	small, large := 2*b.n, 20*b.n
	var heaps, rss [2]float64
	for i, n := range []int{small, large} {
		q, err := b.env.queue(b.ctx, "memory", false)
		if err != nil {
			return nil, err
		}
		if err := preload(b.ctx, b.client, q, n, 0, "{}"); err != nil {
			return nil, err
		}
		runtime.GC()
		m := sampleMemory()
		if _, err := runConsumer(b.ctx, b.client, q, n, runOpts{concurrency: 32}); err != nil {
			m.finish()
			return nil, err
		}
		heaps[i] = float64(m.finish()) / (1 << 20)
		runtime.GC()
		rss[i] = float64(rssKiB()) / 1024
	}
	// 1 MB in flight: 100 messages of 10 KiB held by slow handlers.
	q, err := b.env.queue(b.ctx, "memory-bodies", false)
	if err != nil {
		return nil, err
	}
	if err := preload(b.ctx, b.client, q, 100, 0, strings.Repeat("x", 10<<10)); err != nil {
		return nil, err
	}
	runtime.GC()
	m := sampleMemory()
	if _, err := runConsumer(b.ctx, b.client, q, 100, runOpts{concurrency: 100, handlerDelay: 2 * time.Second}); err != nil {
		m.finish()
		return nil, err
	}
	bodies := float64(m.finish()) / (1 << 20)
	return []row{
		{name: fmt.Sprintf("peak heap, %d msgs", small), value: heaps[0], unit: "MiB"},
		row{name: fmt.Sprintf("peak heap, %d msgs", large), value: heaps[1], limit: heaps[0], unit: "MiB", note: "limit: the smaller run's peak"}.with(ratioAtMost(1.1)),
		{name: fmt.Sprintf("RSS after %d msgs", small), value: rss[0], unit: "MiB"},
		row{name: fmt.Sprintf("RSS after %d msgs", large), value: rss[1], limit: rss[0], unit: "MiB", note: "limit: RSS after the smaller run"}.with(ratioAtMost(1.1)),
		{name: "peak heap, 1 MB of bodies in flight", value: bodies, unit: "MiB", note: "100 × 10 KiB bodies held 2 s"},
	}, nil
}
