package consumer

import (
	"context"
	"testing"
	"time"
)

// TestPollersProbe: a full receive adds a call only after need full
// receives in a row; a call added (a probe) whose receives come back short
// before they all came back full doubles need, up to maxNeed; one that
// held halves it. A short receive outside a probe removes a call and
// leaves need alone.
func TestPollersProbe(t *testing.T) {
	p := newPollers(4, time.Second, false)
	recv := func(asked, got int) {
		t.Helper()
		tr, ok := p.acquire(context.Background())
		if !ok {
			t.Fatal("no turn")
		}
		tr.calling()
		tr.done(asked, got)
	}
	check := func(limit, need int) {
		t.Helper()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.limit != limit || p.need != need {
			t.Fatalf("limit %d, need %d; want %d, %d", p.limit, p.need, limit, need)
		}
	}
	check(4, 1)
	for range 5 { // an idle queue: one call
		recv(10, 0)
	}
	check(1, 1)
	recv(10, 10) // one full receive adds a call (need 1)
	check(2, 1)
	recv(10, 3) // the probe fails
	check(1, 2)
	recv(10, 10)
	check(1, 2)
	recv(10, 10) // two in a row now
	check(2, 2)
	recv(10, 0) // fails again
	check(1, 4)
	for range 4 {
		recv(10, 10)
	}
	check(2, 4)
	// Both calls at once came back full: the probe held, need halves,
	// and these two in a row add another call.
	recv(10, 10)
	recv(10, 10)
	check(3, 2)
	// Failed probes: each call added is taken back, and need stops at
	// maxNeed.
	for range 10 {
		for range p.need {
			recv(10, 10)
		}
		recv(10, 1)
	}
	check(3, maxNeed)
	// A backlog: every receive full. It adds a call within maxNeed, and
	// each that holds halves need, so every receiver is back soon after.
	n := 0
	for p.limit < p.most {
		recv(10, 10)
		n++
	}
	if n > maxNeed+maxNeed/2+maxNeed/4 {
		t.Errorf("%d full receives to bring every receiver back, want at most %d", n, maxNeed+maxNeed/2+maxNeed/4)
	}
	for range p.most { // the last probe holds
		recv(10, 10)
	}
	need := p.need
	recv(10, 2) // a short receive outside a probe: one call fewer, need kept
	check(p.most-1, need)
}

// TestPollersFIFO: on a FIFO queue a short receive refutes no probe
// (locked groups make receives short on a backlog too): need stays. An
// empty one does (the call added found no unlocked group): need doubles,
// up to maxNeed, so that with few groups, all locked until the messages
// one receive brought are deleted, a call is added only now and then.
func TestPollersFIFO(t *testing.T) {
	p := newPollers(4, time.Second, true)
	recv := func(got int) {
		t.Helper()
		tr, _ := p.acquire(context.Background())
		tr.done(10, got)
	}
	check := func(limit, need int) {
		t.Helper()
		if p.limit != limit || p.need != need {
			t.Fatalf("limit %d, need %d; want %d, %d", p.limit, p.need, limit, need)
		}
	}
	for _, got := range []int{0, 0, 0, 10, 3, 10} {
		recv(got)
	}
	check(2, 1)
	recv(0) // the call added came back empty
	check(1, 2)
	// Few groups: each time a call is added, the receives at once share
	// the groups one delete unlocks, one full, the other empty.
	for range 10 {
		for range p.need {
			recv(10)
		}
		recv(0)
	}
	check(1, maxNeed)
}
