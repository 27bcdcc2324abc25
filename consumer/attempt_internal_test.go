package consumer

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

// TestNewAttemptID: an attempt id is 32 hex digits (SQS allows up to 128
// alphanumeric and punctuation characters), fresh on every call, and costs
// one allocation.
func TestNewAttemptID(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := newAttemptID()
		if !hex32.MatchString(id) {
			t.Fatalf("attempt id %q is not 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("attempt id %q repeated", id)
		}
		seen[id] = true
	}
	if n := testing.AllocsPerRun(100, func() { _ = newAttemptID() }); n > 1 {
		t.Errorf("newAttemptID allocates %.0f times, want 1", n)
	}
}

// The receive table: what a receiver does between its calls, step by
// step, on both kinds of queue. Each row is a run of receives (after
// failed receives in a row); each step makes one call at its time
// (seconds after the first) with the slots it holds, and the call returns
// got messages (-1: it failed). The columns say what the call carried and
// what the receiver then does. See nextReceive and afterReceive.
func TestReceiveTable(t *testing.T) {
	t.Parallel()
	type step struct {
		at    int // seconds after the row's first call
		asked int
		got   int // -1: the call failed

		// The call.
		id    string // its ReceiveRequestAttemptId ("" on standard queues)
		start int    // seconds: when SQS's 12 hours count from
		// What the receiver does next.
		release  int
		keep     bool
		backoff  time.Duration
		short    bool
		empty    bool
		full     bool
		failures int // in a row, after the call
	}
	tests := []struct {
		name   string
		fifo   bool
		failed int // receives failed in a row before the first step
		steps  []step
	}{
		{"standard: a full receive shows a backlog", false, 0, []step{
			{at: 0, asked: 10, got: 10, full: true},
		}},
		{"standard: a short receive hands back the slots it got nothing for", false, 0, []step{
			{at: 0, asked: 10, got: 3, release: 7, short: true},
			{at: 1, asked: 10, got: 0, start: 1, release: 10, short: true, empty: true},
		}},
		{"standard: a failure hands back every slot; the backoff grows", false, 0, []step{
			{at: 0, asked: 10, got: -1, release: 10, backoff: 200 * time.Millisecond, failures: 1},
			{at: 1, asked: 4, got: -1, start: 1, release: 4, backoff: 400 * time.Millisecond, failures: 2},
			{at: 2, asked: 10, got: 10, start: 2},
			{at: 3, asked: 10, got: 10, start: 3, full: true},
		}},
		{"FIFO: every receive carries a new attempt id", true, 0, []step{
			{at: 0, asked: 10, got: 10, id: "a1", full: true},
			{at: 1, asked: 10, got: 2, id: "a2", start: 1, release: 8, short: true},
		}},
		{"FIFO: a failed receive is retried with its id, its start and its slots", true, 0, []step{
			{at: 0, asked: 10, got: -1, id: "a1", keep: true, backoff: 200 * time.Millisecond, failures: 1},
			{at: 1, asked: 10, got: -1, id: "a1", keep: true, backoff: 400 * time.Millisecond, failures: 2},
			{at: 2, asked: 10, got: 10, id: "a1"}, // the lost response's messages: no backlog shown
			{at: 3, asked: 10, got: 10, id: "a2", start: 3, full: true},
		}},
		{"FIFO: a retry older than SQS keeps the id gets a new one", true, 0, []step{
			{at: 0, asked: 10, got: -1, id: "a1", keep: true, backoff: 200 * time.Millisecond, failures: 1},
			{at: 240, asked: 10, got: -1, id: "a1", keep: true, backoff: 400 * time.Millisecond, failures: 2},
			{at: 241, asked: 10, got: 5, id: "a2", start: 241, release: 5, short: true},
		}},
		{"FIFO: the backoff stops growing at 5s", true, 23, []step{
			{at: 0, asked: 10, got: -1, id: "a1", keep: true, backoff: 4800 * time.Millisecond, failures: 24},
			{at: 1, asked: 10, got: -1, id: "a1", keep: true, backoff: 5 * time.Second, failures: 25},
			{at: 2, asked: 10, got: -1, id: "a1", keep: true, backoff: 5 * time.Second, failures: 26},
			{at: 3, asked: 10, got: 10, id: "a1"},
		}},
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ids := 0
			newID := func() string { ids++; return fmt.Sprint("a", ids) }
			st := receiveState{failures: tt.failed}
			for i, s := range tt.steps {
				var call receiveCall
				st, call = nextReceive(st, tt.fifo, t0.Add(time.Duration(s.at)*time.Second), newID)
				if call.attemptID != s.id || !call.start.Equal(t0.Add(time.Duration(s.start)*time.Second)) {
					t.Errorf("step %d: call with attempt id %q from %s, want %q from %ds", i, call.attemptID, call.start.Sub(t0), s.id, s.start)
				}
				var act receiveAction
				st, act = afterReceive(st, tt.fifo, s.asked, s.got)
				want := receiveAction{release: s.release, keep: s.keep, backoff: s.backoff, short: s.short, empty: s.empty, full: s.full}
				if act != want {
					t.Errorf("step %d: %+v, want %+v", i, act, want)
				}
				if st.failures != s.failures {
					t.Errorf("step %d: %d failures in a row, want %d", i, st.failures, s.failures)
				}
			}
		})
	}
}
