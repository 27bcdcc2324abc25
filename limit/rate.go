package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"
)

// RateConfig configures a [Rate].
type RateConfig struct {
	// Store keeps the rate's timeline. Required.
	Store RateStore
	// Name names the rate in Store: every Rate of one Name, in any
	// process, shares one budget. Required.
	Name string
	// Rate is the starts per second that the Rates of Name share.
	// Required, positive.
	Rate float64
	// Block is how many slots one Reserve leases: one store write per
	// Block starts. Defaults to a tenth of Rate (100 ms of the timeline),
	// at least 1.
	Block int
	// Burst is how many slots of a timeline left idle may still be
	// spent at once when work comes back. Defaults to 1: a fleet that was
	// idle starts at the rate, not above it.
	Burst int
	// Ahead is how far ahead of now a block may start: a process with
	// many waiting goroutines leases blocks until its slots reach that
	// far, and a start waits about that long at most when the fleet has
	// more work than the rate allows. Defaults to DefaultAhead (250ms).
	Ahead time.Duration
	// Logger logs failed Reserves (warnings). Defaults to a no-op
	// logger.
	Logger *zap.Logger
}

// DefaultAhead is the default of [RateConfig.Ahead].
const DefaultAhead = 250 * time.Millisecond

// Rate paces starts to a rate shared by every Rate of one name, in any
// process: it leases blocks of slots from a [RateStore] and hands them to
// the goroutines calling [Rate.Wait], each at its slot's time. It is safe
// for concurrent use and starts no goroutines.
type Rate struct {
	store RateStore
	name  string
	req   RateRequest
	log   *zap.Logger

	mu   sync.Mutex
	from time.Time // the next slot this process holds
	left int       // how many it holds from there
	// busy is set while a Reserve is in flight: closed when it ends.
	busy chan struct{}
	// notBefore is when the next Reserve may be made, after one that
	// leased nothing (the timeline is leased far enough) or failed.
	notBefore time.Time
	failures  int
}

// NewRate returns a Rate. It makes no call.
func NewRate(cfg RateConfig) (*Rate, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("limit: RateConfig.Store is required")
	case cfg.Name == "":
		return nil, errors.New("limit: RateConfig.Name is required: every Rate of one name shares one budget")
	case !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) || cfg.Rate > 1e9:
		return nil, fmt.Errorf("limit: RateConfig.Rate %v must be a number of starts per second, above 0 and at most 1e9", cfg.Rate)
	case cfg.Block < 0 || cfg.Burst < 0 || cfg.Ahead < 0:
		return nil, fmt.Errorf("limit: RateConfig: Block (%d), Burst (%d) and Ahead (%s) must not be negative", cfg.Block, cfg.Burst, cfg.Ahead)
	}
	every := time.Duration(float64(time.Second) / cfg.Rate)
	block := cfg.Block
	if block == 0 {
		block = max(1, int(cfg.Rate/10))
	}
	burst := cfg.Burst
	if burst == 0 {
		burst = 1
	}
	ahead := cfg.Ahead
	if ahead == 0 {
		ahead = DefaultAhead
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Rate{
		store: cfg.Store,
		name:  cfg.Name,
		req:   RateRequest{Every: every, N: block, Burst: time.Duration(burst) * every, Ahead: ahead},
		log:   log,
	}, nil
}

// Wait returns at the time of the next slot this process holds, leasing a
// block first when it holds none. It returns ctx's error, and the slot is
// lost, when ctx ends first. A failed Reserve is logged and tried again
// after a backoff (up to 5 s): starts wait for the store, never pass it.
func (r *Rate) Wait(ctx context.Context) error {
	for {
		r.mu.Lock()
		now := time.Now()
		r.dropStale(now)
		if r.left > 0 {
			at := r.from
			r.from = r.from.Add(r.req.Every)
			r.left--
			r.mu.Unlock()
			return sleepUntil(ctx, at)
		}
		if r.busy != nil {
			busy := r.busy
			r.mu.Unlock()
			select {
			case <-busy:
				continue
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if now.Before(r.notBefore) {
			at := r.notBefore
			r.mu.Unlock()
			if err := sleepUntil(ctx, at); err != nil {
				return err
			}
			continue
		}
		r.busy = make(chan struct{})
		r.mu.Unlock()

		lease, err := r.store.Reserve(ctx, r.name, r.req)

		r.mu.Lock()
		close(r.busy)
		r.busy = nil
		switch {
		case err != nil:
			if ctx.Err() != nil {
				r.mu.Unlock()
				return context.Cause(ctx)
			}
			r.failures++
			backoff := min(50*time.Millisecond<<min(r.failures, 10), 5*time.Second)
			r.notBefore = time.Now().Add(backoff)
			r.log.Warn("limit: reserving a block of the rate failed; starts wait for it",
				zap.String("rate", r.name), zap.Int("failures", r.failures), zap.Duration("retry_in", backoff), zap.Error(err))
		case lease.N <= 0:
			// The fleet leased the timeline far enough ahead: come back
			// when its end is within Ahead, a random part of a block
			// later, so that the workers refused together do not all ask
			// again at once (and the same one win each time).
			r.failures = 0
			r.notBefore = lease.Next.Add(-r.req.Ahead + time.Duration(rand.Int64N(int64(r.req.Every)*int64(r.req.N)/2+1)))
		default:
			r.failures = 0
			r.from, r.left = lease.From, lease.N
		}
		r.mu.Unlock()
	}
}

// dropStale drops the slots held that are more than Burst in the past:
// spent now, they would be a burst above the rate; r.mu is held.
func (r *Rate) dropStale(now time.Time) {
	if r.left == 0 {
		return
	}
	floor := now.Add(-r.req.Burst)
	if !r.from.Before(floor) {
		return
	}
	skip := int((floor.Sub(r.from) + r.req.Every - 1) / r.req.Every)
	if skip >= r.left {
		r.left = 0
		return
	}
	r.from = r.from.Add(time.Duration(skip) * r.req.Every)
	r.left -= skip
}

// sleepUntil waits until at, or until ctx ends (its cause returned).
func sleepUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
