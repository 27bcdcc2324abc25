package outbox

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sqsonce/sqsonce/internal/partlease"
)

// MemoryConfig configures a [Memory] store; the zero value is ready.
type MemoryConfig struct {
	// Partitions spread the entities over relays. Defaults to 16.
	Partitions int
	// Lease is how long a relay holds a partition without renewing it.
	// Defaults to 10s.
	Lease time.Duration
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Memory is an in-process Store, for tests and single-process programs.
// Put is its writer: the events of one call are committed together.
type Memory struct {
	cfg MemoryConfig

	mu     sync.Mutex
	seq    int64
	events map[string]*memEvent // by handle
	leases []memLease           // by partition
	owners map[string]time.Time // owner → seen until
}

type memEvent struct {
	ev      Event
	seq     int64
	retryAt time.Time
}

type memLease struct {
	owner string
	until time.Time
}

// NewMemory returns an empty Memory store.
func NewMemory(cfg MemoryConfig) *Memory {
	cfg.Partitions = cmp.Or(cfg.Partitions, 16)
	cfg.Lease = cmp.Or(cfg.Lease, 10*time.Second)
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Memory{cfg: cfg, events: map[string]*memEvent{}, leases: make([]memLease, cfg.Partitions), owners: map[string]time.Time{}}
}

// Put commits evs: all of them, in order, or none when one is invalid.
func (m *Memory) Put(_ context.Context, evs ...Event) error {
	now := m.cfg.NowFunc()
	for i := range evs {
		if err := Prepare(&evs[i], now); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range evs {
		m.seq++
		ev.Handle = strconv.FormatInt(m.seq, 10)
		ev.Trace = maps.Clone(ev.Trace)
		m.events[ev.Handle] = &memEvent{ev: ev, seq: m.seq}
	}
	return nil
}

// Due implements [Store].
func (m *Memory) Due(_ context.Context, owner string, limit int) ([]Event, error) {
	now := m.cfg.NowFunc()
	m.mu.Lock()
	defer m.mu.Unlock()
	held := m.leasePartitions(owner, now)
	heads := map[string]*memEvent{}
	for _, e := range m.events {
		if !held[Partition(e.ev.Entity, m.cfg.Partitions)] {
			continue
		}
		if h, ok := heads[e.ev.Entity]; !ok || e.seq < h.seq {
			heads[e.ev.Entity] = e
		}
	}
	var due []*memEvent
	for _, h := range heads {
		if !h.ev.Dead && !h.retryAt.After(now) {
			due = append(due, h)
		}
	}
	slices.SortFunc(due, func(a, b *memEvent) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Event, 0, min(limit, len(due)))
	for _, e := range due[:min(limit, len(due))] {
		out = append(out, e.ev)
	}
	return out, nil
}

// DueRuns implements [RunStore]: each entity's ready run, at most
// ceil(limit / entities) events of each, ranked by place in the run, then
// by commit.
func (m *Memory) DueRuns(_ context.Context, owner string, limit int, inFlight []Event) ([]Event, error) {
	now := m.cfg.NowFunc()
	after := map[string]int64{} // entity → its last event in flight
	for _, ev := range inFlight {
		seq, _ := strconv.ParseInt(ev.Handle, 10, 64)
		after[ev.Entity] = max(after[ev.Entity], seq)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	held := m.leasePartitions(owner, now)
	byEntity := map[string][]*memEvent{}
	for _, e := range m.events {
		if held[Partition(e.ev.Entity, m.cfg.Partitions)] {
			byEntity[e.ev.Entity] = append(byEntity[e.ev.Entity], e)
		}
	}
	if len(byEntity) == 0 || limit <= 0 {
		return nil, nil
	}
	run := (limit + len(byEntity) - 1) / len(byEntity)
	type placed struct {
		e     *memEvent
		place int
	}
	var due []placed
	for entity, evs := range byEntity {
		slices.SortFunc(evs, func(a, b *memEvent) int { return cmp.Compare(a.seq, b.seq) })
		if last, ok := after[entity]; ok {
			evs = slices.DeleteFunc(evs, func(e *memEvent) bool { return e.seq <= last })
		}
		for i, e := range evs[:min(run, len(evs))] {
			if e.ev.Dead || e.retryAt.After(now) {
				break // held back, and its entity's later events with it
			}
			due = append(due, placed{e, i})
		}
	}
	slices.SortFunc(due, func(a, b placed) int { return cmp.Or(cmp.Compare(a.place, b.place), cmp.Compare(a.e.seq, b.e.seq)) })
	out := make([]Event, 0, min(limit, len(due)))
	for _, p := range due[:min(limit, len(due))] {
		out = append(out, p.e.ev)
	}
	return out, nil
}

// leasePartitions renews owner's leases and takes free ones up to its fair
// share of the live owners (package partlease's rule); it returns the
// partitions owner holds. m.mu is held.
func (m *Memory) leasePartitions(owner string, now time.Time) map[int]bool {
	// The memory leases never fail.
	ps, _ := partlease.Acquire(context.Background(), memLeases{m}, owner, m.cfg.Partitions, now, m.cfg.Lease)
	held := make(map[int]bool, len(ps))
	for _, p := range ps {
		held[p] = true
	}
	return held
}

// memLeases are the Memory's partition leases; m.mu is held.
type memLeases struct{ m *Memory }

func (l memLeases) Register(_ context.Context, owner string, now, until time.Time) (int, error) {
	l.m.owners[owner] = until
	live := 0
	for o, u := range l.m.owners {
		if u.After(now) {
			live++
		} else {
			delete(l.m.owners, o)
		}
	}
	return live, nil
}

func (l memLeases) Held(_ context.Context, owner string, now time.Time) ([]int, error) {
	var ps []int
	for p, le := range l.m.leases {
		if le.owner == owner && le.until.After(now) {
			ps = append(ps, p)
		}
	}
	return ps, nil
}

func (l memLeases) Drop(_ context.Context, _ string, ps []int) error {
	for _, p := range ps {
		l.m.leases[p] = memLease{}
	}
	return nil
}

func (l memLeases) Renew(_ context.Context, owner string, ps []int, now, until time.Time) ([]int, error) {
	var renewed []int
	for _, p := range ps {
		if le := l.m.leases[p]; le.owner == owner && le.until.After(now) {
			l.m.leases[p].until = until
			renewed = append(renewed, p)
		}
	}
	return renewed, nil
}

func (l memLeases) Take(_ context.Context, owner string, n int, now, until time.Time) ([]int, error) {
	var taken []int
	for p, le := range l.m.leases {
		if len(taken) >= n {
			break
		}
		if le.owner == "" || !le.until.After(now) {
			l.m.leases[p] = memLease{owner: owner, until: until}
			taken = append(taken, p)
		}
	}
	return taken, nil
}

// Published implements [Store].
func (m *Memory) Published(_ context.Context, evs []Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range evs {
		delete(m.events, ev.Handle)
	}
	return nil
}

// Failed implements [Store].
func (m *Memory) Failed(_ context.Context, ev Event, reason string, retryAt time.Time, dead bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.events[ev.Handle]
	if !ok {
		return nil // published meanwhile by another relay
	}
	e.ev.Attempts = ev.Attempts
	e.ev.LastError = reason
	e.ev.Dead = dead
	e.retryAt = retryAt
	return nil
}

// Stats implements [Store].
func (m *Memory) Stats(context.Context) (Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s Stats
	var dead []*memEvent
	for _, e := range m.events {
		if e.ev.Dead {
			s.Dead++
			dead = append(dead, e)
			continue
		}
		s.Pending++
		if s.Oldest.IsZero() || e.ev.CreatedAt.Before(s.Oldest) {
			s.Oldest = e.ev.CreatedAt
		}
	}
	slices.SortFunc(dead, func(a, b *memEvent) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range dead[:min(100, len(dead))] {
		s.DeadEvents = append(s.DeadEvents, e.ev)
	}
	return s, nil
}

// Requeue implements [Store].
func (m *Memory) Requeue(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.events {
		if e.ev.Dead {
			e.ev.Dead, e.ev.Attempts, e.retryAt = false, 0, time.Time{}
			n++
		}
	}
	return n, nil
}

// Discard implements [Store].
func (m *Memory) Discard(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	found := false
	for h, e := range m.events {
		if e.ev.ID == id && e.ev.Dead {
			delete(m.events, h)
			found = true
		}
	}
	if !found {
		return ErrNotDead
	}
	return nil
}

// Edit implements [Store].
func (m *Memory) Edit(_ context.Context, id, payload string) error {
	if payload == "" {
		return ErrNoPayload
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	found := false
	for _, e := range m.events {
		if e.ev.ID == id && e.ev.Dead {
			e.ev.Payload, e.ev.Dead, e.ev.Attempts, e.retryAt = payload, false, 0, time.Time{}
			found = true
		}
	}
	if !found {
		return ErrNotDead
	}
	return nil
}

// Release implements [Store].
func (m *Memory) Release(_ context.Context, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, l := range m.leases {
		if l.owner == owner {
			m.leases[p] = memLease{}
		}
	}
	delete(m.owners, owner)
	return nil
}

var _ RunStore = (*Memory)(nil)
