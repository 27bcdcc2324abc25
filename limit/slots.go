package limit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// SlotsConfig configures [Slots].
type SlotsConfig struct {
	// Store keeps the slots. Required.
	Store SlotStore
	// Name names the limit in Store: keys of one Name are counted
	// together, in every process. Required.
	Name string
	// TTL is how long a slot outlives its holder's last Acquire or
	// Extend: a crashed process's slots free themselves after it. Call
	// [Slots.Extend] well within it (every TTL/3). Defaults to
	// DefaultSlotTTL (30s).
	TTL time.Duration
}

// DefaultSlotTTL is the default of [SlotsConfig.TTL].
const DefaultSlotTTL = 30 * time.Second

// Slots holds one process's slots of a per-key concurrency limit shared
// through a [SlotStore]: at most limit holders of a key at once, in every
// process. Each Acquire is one holder of its own. It is safe for
// concurrent use and starts no goroutines: extend the slots it holds with
// [Slots.Extend].
type Slots struct {
	store SlotStore
	name  string
	ttl   time.Duration
	id    string
	seq   atomic.Uint64

	mu   sync.Mutex
	held map[Slot]struct{}
}

// NewSlots returns a Slots holding none. It makes no call.
func NewSlots(cfg SlotsConfig) (*Slots, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("limit: SlotsConfig.Store is required")
	case cfg.Name == "":
		return nil, errors.New("limit: SlotsConfig.Name is required: keys of one name are counted together")
	case cfg.TTL < 0:
		return nil, fmt.Errorf("limit: SlotsConfig.TTL %s must not be negative", cfg.TTL)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultSlotTTL
	}
	return &Slots{store: cfg.Store, name: cfg.Name, ttl: ttl, id: hex.EncodeToString(b[:]), held: map[Slot]struct{}{}}, nil
}

// TTL returns the slots' TTL.
func (s *Slots) TTL() time.Duration { return s.ttl }

// Acquire takes one of limit slots of key, with one store call: ok is
// false when limit holders hold one already.
func (s *Slots) Acquire(ctx context.Context, key string, limit int) (slot Slot, ok bool, err error) {
	slot = Slot{Name: s.name, Key: key, Holder: s.id + "-" + strconv.FormatUint(s.seq.Add(1), 36)}
	ok, err = s.store.Acquire(ctx, slot, limit, s.ttl)
	if err != nil || !ok {
		return Slot{}, false, err
	}
	s.mu.Lock()
	s.held[slot] = struct{}{}
	s.mu.Unlock()
	return slot, true, nil
}

// Release frees a slot Acquire returned.
func (s *Slots) Release(ctx context.Context, slot Slot) error {
	s.mu.Lock()
	delete(s.held, slot)
	s.mu.Unlock()
	return s.store.Release(ctx, slot)
}

// Held returns how many slots this Slots holds.
func (s *Slots) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// Extend extends every slot held by TTL from now. It returns the slots
// lost (expired and taken by another holder: they are no longer held),
// and the other failures joined (those slots are still held, and are
// tried again at the next Extend).
func (s *Slots) Extend(ctx context.Context) (lost []Slot, err error) {
	s.mu.Lock()
	slots := make([]Slot, 0, len(s.held))
	for sl := range s.held {
		slots = append(slots, sl)
	}
	s.mu.Unlock()
	var errs []error
	for _, sl := range slots {
		e := s.store.Extend(ctx, sl, s.ttl)
		switch {
		case errors.Is(e, ErrLost):
			s.mu.Lock()
			_, still := s.held[sl]
			delete(s.held, sl)
			s.mu.Unlock()
			if still {
				lost = append(lost, sl)
			}
		case e != nil:
			errs = append(errs, e)
		}
	}
	return lost, errors.Join(errs...)
}
