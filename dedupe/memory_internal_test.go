package dedupe

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/leasekey"
)

// model is the store's rule written plainly: a map that never forgets,
// where an expired record counts as absent. Memory must answer every call
// as it does, whenever its sweep happens to delete a record.
type model struct {
	ttl     time.Duration
	records map[string]memRecord
}

func (m *model) claim(key, fp, token string, now time.Time, lease time.Duration) Status {
	r, ok := m.records[key]
	if !ok || r.expiresAt.Before(now) || (r.status == StatusInProgress && r.leaseUntil.Before(now) && r.fingerprint == fp) {
		m.records[key] = memRecord{status: StatusInProgress, token: token, fingerprint: fp, leaseUntil: now.Add(lease), expiresAt: now.Add(m.ttl)}
		return Claimed
	}
	switch {
	case r.fingerprint != fp:
		return KeyReused
	case r.status == StatusCompleted:
		return Duplicate
	}
	return InProgress
}

func (m *model) owned(key, token string, now time.Time) (memRecord, bool) {
	r, ok := m.records[key]
	return r, ok && r.token == token && r.status == StatusInProgress && !r.expiresAt.Before(now)
}

// TestMemoryMatchesModel runs random calls on few keys with a clock that
// jumps past leases and TTLs, so records are swept, moved and removed
// while others are written, and compares each answer with the model.
func TestMemoryMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(1_800_000_000, 0)
	const ttl, lease = time.Minute, 10 * time.Second
	mem := NewMemory(MemoryConfig{TTL: ttl, NowFunc: func() time.Time { return now }})
	ref := &model{ttl: ttl, records: map[string]memRecord{}}
	ctx := context.Background()
	type claim struct{ key, real, model string }
	var claims []claim
	for i := range 100_000 {
		key := "k" + strconv.Itoa(rng.IntN(300))
		fp := "fp" + strconv.Itoa(rng.IntN(2))
		switch op := rng.IntN(10); {
		case op < 4:
			c, err := mem.Claim(ctx, key, fp, lease)
			if err != nil {
				t.Fatal(err)
			}
			tok := "model-" + strconv.Itoa(i)
			if want := ref.claim(leasekey.PK("", key), fp, tok, now, lease); c.Status != want {
				t.Fatalf("op %d: Claim(%s) = %s, want %s", i, key, c.Status, want)
			}
			if c.Status == Claimed {
				claims = append(claims, claim{key, c.Token, tok})
			}
		case len(claims) > 0:
			c := claims[rng.IntN(len(claims))]
			r, ok := ref.owned(leasekey.PK("", c.key), c.model, now)
			var err error
			switch op {
			case 4, 5:
				err = mem.Extend(ctx, c.key, c.real, lease)
				if ok {
					r.leaseUntil, r.expiresAt = now.Add(lease), now.Add(ttl)
					ref.records[leasekey.PK("", c.key)] = r
				}
			case 6, 7:
				err = mem.Complete(ctx, c.key, c.real)
				if ok {
					r.status, r.leaseUntil, r.expiresAt = StatusCompleted, time.Time{}, now.Add(ttl)
					ref.records[leasekey.PK("", c.key)] = r
				}
			default:
				err = mem.Release(ctx, c.key, c.real)
				if ok {
					delete(ref.records, leasekey.PK("", c.key))
				}
			}
			if ok != (err == nil) || (err != nil && !errors.Is(err, ErrNotOwner)) {
				t.Fatalf("op %d (%d) on %s: err %v, want owner=%v", i, op, c.key, err, ok)
			}
		}
		if i%50_000 == 0 { // a burst of new keys grows the storage; its expiry shrinks it
			for j := range 3000 {
				key := "burst-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
				c, _ := mem.Claim(ctx, key, "fp0", lease)
				if want := ref.claim(leasekey.PK("", key), "fp0", "model-burst", now, lease); c.Status != want {
					t.Fatalf("burst: Claim(%s) = %s, want %s", key, c.Status, want)
				}
			}
		}
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		if i%1000 == 0 {
			mem.mu.Lock()
			if len(mem.index) != len(mem.records) {
				t.Fatalf("op %d: %d index entries for %d records", i, len(mem.index), len(mem.records))
			}
			for j, r := range mem.records {
				if mem.index[r.pk] != j {
					t.Fatalf("op %d: record %s at %d, indexed at %d", i, r.pk, j, mem.index[r.pk])
				}
			}
			mem.mu.Unlock()
		}
	}
}
