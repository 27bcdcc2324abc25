// Package partlease is the rule by which outbox relays share the
// partitions of an outbox: each live relay holds at most its share,
// ceil(partitions / live relays), renews it, gives up what it holds over
// it so that another relay can take it, and takes free partitions (no
// lease, or an ended one) up to it, lowest first. The rule is written
// once here; a store only keeps the leases ([Leases]).
package partlease

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Leases are one store's partition leases and live relays. Each method is
// one step of [Acquire]; a store may answer Take from what Held read.
type Leases interface {
	// Register records owner as a live relay until until, and returns
	// how many relays are live at now, owner included.
	Register(ctx context.Context, owner string, now, until time.Time) (live int, err error)
	// Held returns the partitions whose lease owner holds at now.
	Held(ctx context.Context, owner string, now time.Time) ([]int, error)
	// Drop gives up owner's leases of ps.
	Drop(ctx context.Context, owner string, ps []int) error
	// Renew moves owner's leases of ps that it still holds to until, and
	// returns the partitions renewed.
	Renew(ctx context.Context, owner string, ps []int, now, until time.Time) ([]int, error)
	// Take leases to owner, until until, up to n partitions that have no
	// lease live at now, lowest first, and returns those it took.
	Take(ctx context.Context, owner string, n int, now, until time.Time) ([]int, error)
}

// Share is each of live relays' share of partitions: ceil(partitions /
// live), all of them for a relay alone.
func Share(partitions, live int) int {
	live = max(live, 1)
	return (partitions + live - 1) / live
}

// Acquire runs the rule for owner at now with leases of length lease: it
// registers owner, keeps the lowest of the partitions it holds up to its
// share and drops the rest, renews those it keeps, and takes free ones up
// to its share. It returns the partitions owner holds, ascending.
func Acquire(ctx context.Context, l Leases, owner string, partitions int, now time.Time, lease time.Duration) ([]int, error) {
	until := now.Add(lease)
	live, err := l.Register(ctx, owner, now, until)
	if err != nil {
		return nil, err
	}
	share := Share(partitions, live)
	mine, err := l.Held(ctx, owner, now)
	if err != nil {
		return nil, err
	}
	mine = slices.Sorted(slices.Values(mine))
	keep, drop := mine, []int(nil)
	if len(mine) > share { // over its share: let another relay take the rest
		keep, drop = mine[:share], mine[share:]
	}
	if len(drop) > 0 {
		if err := l.Drop(ctx, owner, drop); err != nil {
			return nil, err
		}
	}
	var held []int
	if len(keep) > 0 {
		if held, err = l.Renew(ctx, owner, keep, now, until); err != nil {
			return nil, err
		}
	}
	if len(held) < share {
		taken, err := l.Take(ctx, owner, share-len(held), now, until)
		if err != nil {
			return nil, err
		}
		held = append(held, taken...)
	}
	slices.Sort(held)
	return slices.Compact(held), nil
}

// Cache keeps what [Acquire] returned for each owner and answers with it
// until a third of the lease is left, so that a relay polling often
// renews its leases a few times per lease, and never reads on a lease
// about to end. Its zero value is ready.
type Cache struct {
	mu    sync.Mutex
	held  map[string][]int
	until map[string]time.Time
}

// Partitions returns owner's partitions: the cached ones while fresh at
// now, else those acquire returns, cached for lease/3. Calls for one Cache
// run one at a time.
func (c *Cache) Partitions(owner string, now time.Time, lease time.Duration, acquire func() ([]int, error)) ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.until[owner]; ok && now.Before(until) {
		return c.held[owner], nil
	}
	held, err := acquire()
	if err != nil {
		return nil, err
	}
	if c.held == nil {
		c.held, c.until = map[string][]int{}, map[string]time.Time{}
	}
	c.held[owner] = held
	c.until[owner] = now.Add(lease / 3)
	return held, nil
}

// Forget drops owner's cached partitions (it released them).
func (c *Cache) Forget(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.held, owner)
	delete(c.until, owner)
}
