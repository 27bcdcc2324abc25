package consumer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Ready reports whether the consumer is receiving: nil while Run (or
// Drain) runs and its receives succeed; an error before Run has passed its
// start-up checks, from the start of the drain on, after Run returned,
// and while receives fail (until one succeeds again). Package opshttp
// serves it as /readyz. It is safe to call at any time, from any
// goroutine.
func (c *Consumer) Ready() error {
	if c.health == nil {
		return errNotRunning
	}
	return c.health.ready()
}

var (
	errNotRunning = errors.New("consumer: not running")
	errDraining   = errors.New("consumer: draining")
)

// health is what Ready reports: whether a Run is receiving, and how its
// receives fare. It outlives each Run (Drain's Run shares its Consumer's).
type health struct {
	// failing is set while receives fail: a successful receive takes the
	// lock only then.
	failing atomic.Bool

	mu       sync.Mutex
	state    runState
	queueURL string
	since    time.Time // when the receives began failing
	stuck    time.Time // when they began failing with only persistent errors; zero otherwise
	last     error     // the last receive's error
}

type runState int

const (
	stopped runState = iota
	running
	draining
)

// start records that a Run receives from queueURL.
func (h *health) start(queueURL string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state, h.queueURL = running, queueURL
	h.since, h.stuck, h.last = time.Time{}, time.Time{}, nil
	h.failing.Store(false)
}

// set records the Run's state (draining, stopped).
func (h *health) set(s runState) {
	h.mu.Lock()
	h.state = s
	h.mu.Unlock()
}

// received records a successful receive.
func (h *health) received() {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	h.since, h.stuck, h.last = time.Time{}, time.Time{}, nil
	h.failing.Store(false)
	h.mu.Unlock()
}

// failed records a failed receive at now, persistent when retrying cannot
// heal its error, and returns for how long receives have failed with only
// such errors (0 when this one is not one).
func (h *health) failed(err error, persistent bool, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		h.since = now
	}
	h.last = err
	h.failing.Store(true)
	if !persistent {
		h.stuck = time.Time{}
		return 0
	}
	if h.stuck.IsZero() {
		h.stuck = now
	}
	return now.Sub(h.stuck)
}

func (h *health) ready() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.state == stopped:
		return errNotRunning
	case h.state == draining:
		return errDraining
	case h.last != nil:
		return fmt.Errorf("consumer: receives from queue %s failing since %s: %w", h.queueURL, h.since.UTC().Format(time.RFC3339), h.last)
	}
	return nil
}
