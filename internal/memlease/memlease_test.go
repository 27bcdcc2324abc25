package memlease

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/leasekey"
)

var errNotOwner = errors.New("not the owner")

// model is the store's rule written plainly: a map that never forgets,
// where an expired record counts as absent. Store must answer every call
// as it does, whenever its sweep happens to delete a record.
type model struct {
	ttl     time.Duration
	records map[string]record[struct{}]
}

func (m *model) claim(key, fp, token string, now time.Time, lease time.Duration) Outcome {
	r, ok := m.records[key]
	if !ok || r.ExpiresAt.Before(now) || (r.Status == StatusInProgress && r.LeaseUntil.Before(now) && r.Fingerprint == fp) {
		m.records[key] = record[struct{}]{token: token, Record: Record[struct{}]{Status: StatusInProgress, Fingerprint: fp, LeaseUntil: now.Add(lease), ExpiresAt: now.Add(m.ttl)}}
		return Claimed
	}
	switch {
	case r.Fingerprint != fp:
		return KeyReused
	case r.Status == StatusCompleted:
		return Completed
	}
	return InProgress
}

func (m *model) owned(key, token string, now time.Time) (record[struct{}], bool) {
	r, ok := m.records[key]
	return r, ok && r.token == token && r.Status == StatusInProgress && !r.ExpiresAt.Before(now)
}

// TestStoreMatchesModel runs random calls on few keys with a clock that
// jumps past leases and TTLs, so records are swept, moved and removed
// while others are written, and compares each answer with the model.
func TestStoreMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(1_800_000_000, 0)
	const ttl, lease = time.Minute, 10 * time.Second
	mem := New[struct{}](Config{TTL: ttl, Now: func() time.Time { return now }, LenientFingerprint: true, ErrNotOwner: errNotOwner})
	ref := &model{ttl: ttl, records: map[string]record[struct{}]{}}
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
			if want := ref.claim(leasekey.PK("", key), fp, tok, now, lease); c.Outcome != want {
				t.Fatalf("op %d: Claim(%s) = %d, want %d", i, key, c.Outcome, want)
			}
			if c.Outcome == Claimed {
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
					r.LeaseUntil, r.ExpiresAt = now.Add(lease), now.Add(ttl)
					ref.records[leasekey.PK("", c.key)] = r
				}
			case 6, 7:
				err = mem.Complete(ctx, c.key, c.real, struct{}{})
				if ok {
					r.Status, r.LeaseUntil, r.ExpiresAt = StatusCompleted, time.Time{}, now.Add(ttl)
					ref.records[leasekey.PK("", c.key)] = r
				}
			default:
				err = mem.Release(ctx, c.key, c.real)
				if ok {
					delete(ref.records, leasekey.PK("", c.key))
				}
			}
			if ok != (err == nil) || (err != nil && !errors.Is(err, errNotOwner)) {
				t.Fatalf("op %d (%d) on %s: err %v, want owner=%v", i, op, c.key, err, ok)
			}
		}
		if i%50_000 == 0 { // a burst of new keys grows the storage; its expiry shrinks it
			for j := range 3000 {
				key := "burst-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
				c, _ := mem.Claim(ctx, key, "fp0", lease)
				if want := ref.claim(leasekey.PK("", key), "fp0", "model-burst", now, lease); c.Outcome != want {
					t.Fatalf("burst: Claim(%s) = %d, want %d", key, c.Outcome, want)
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

// TestFingerprintRule: with LenientFingerprint an empty fingerprint, given
// or stored, matches any; without it fingerprints must be equal.
func TestFingerprintRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		lenient        bool
		stored, given  string
		wantSameAnswer bool
	}{
		{false, "a", "a", true},
		{false, "a", "b", false},
		{false, "", "a", false},
		{false, "a", "", false},
		{true, "a", "a", true},
		{true, "a", "b", false},
		{true, "", "a", true},
		{true, "a", "", true},
	} {
		s := New[struct{}](Config{TTL: time.Hour, Now: time.Now, LenientFingerprint: tc.lenient, ErrNotOwner: errNotOwner})
		c, _ := s.Claim(ctx, "k", tc.stored, time.Minute)
		if err := s.Complete(ctx, "k", c.Token, struct{}{}); err != nil {
			t.Fatal(err)
		}
		want := KeyReused
		if tc.wantSameAnswer {
			want = Completed
		}
		if got, _ := s.Claim(ctx, "k", tc.given, time.Minute); got.Outcome != want || got.Fingerprint != tc.stored {
			t.Errorf("lenient=%v stored %q given %q: %d (fingerprint %q), want %d", tc.lenient, tc.stored, tc.given, got.Outcome, got.Fingerprint, want)
		}
	}
}
