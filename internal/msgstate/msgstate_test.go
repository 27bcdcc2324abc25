package msgstate_test

import (
	"context"
	"testing"

	"github.com/sqsonce/sqsonce/internal/msgstate"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// watcher counts its calls.
type watcher struct{ watched, unwatched int }

func (w *watcher) Watch()   { w.watched++ }
func (w *watcher) Unwatch() { w.unwatched++ }

func beat(context.Context) error { return nil }

// TestMessageCarriesState: what the runtimes set through a *Message is
// what its methods read.
func TestMessageCarriesState(t *testing.T) {
	t.Parallel()
	m := &sqsmsg.Message{ID: "m1", ReceiveCount: 5}
	msgstate.SetKey(m, "k1")
	msgstate.SetUnrun(m, 3)
	msgstate.SetBeatEvery(m, 7)
	if m.Key() != "k1" || m.Attempt() != 2 || m.HeartbeatInterval() != 7 {
		t.Fatalf("Key %q, Attempt %d, HeartbeatInterval %d; want k1, 2, 7", m.Key(), m.Attempt(), m.HeartbeatInterval())
	}
	m.OnHeartbeat(beat)
	if n := len(msgstate.Heartbeats(m)); n != 1 {
		t.Fatalf("%d heartbeat functions, want 1", n)
	}
}

// TestWatcher: only the first OnHeartbeat during a run calls Watch; EndRun
// calls Unwatch only when a function was registered, and not after the
// run.
func TestWatcher(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		before, during     int // OnHeartbeat calls before StartRun and between StartRun and EndRun
		watched, unwatched int
	}{
		{"none", 0, 0, 0, 0},
		{"one during", 0, 1, 1, 1},
		{"three during", 0, 3, 1, 1},
		{"one before", 1, 0, 0, 1},
		{"one before, one during", 1, 1, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := new(sqsmsg.Message)
			w := new(watcher)
			for range tt.before {
				m.OnHeartbeat(beat)
			}
			msgstate.StartRun(m, w)
			for range tt.during {
				m.OnHeartbeat(beat)
			}
			msgstate.EndRun(m)
			m.OnHeartbeat(beat) // after the run: nothing to tell
			if w.watched != tt.watched || w.unwatched != tt.unwatched {
				t.Errorf("Watch %d, Unwatch %d times; want %d, %d", w.watched, w.unwatched, tt.watched, tt.unwatched)
			}
		})
	}
}
