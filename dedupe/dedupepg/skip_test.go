package dedupepg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
)

// beginCounter counts the transactions a handler begins.
type beginCounter struct {
	*pgxpool.Pool
	begins atomic.Int64
}

func (c *beginCounter) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	c.begins.Add(1)
	return c.Pool.BeginTx(ctx, opts)
}

// TestTransactionalDuplicateRuns delivers one message, then the same key
// and body dups more times after its commit, and counts the TxFunc's runs
// and the transactions the duplicates begin: the function never runs for
// them (the row is inserted before it), and with SkipCompleted no
// transaction begins.
func TestTransactionalDuplicateRuns(t *testing.T) {
	t.Parallel()
	const dups = 5
	for _, tc := range []struct {
		name   string
		skip   bool
		begins int64
	}{
		{"default", false, dups},
		{"SkipCompleted", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger(t)
			db := &beginCounter{Pool: l.pool}
			s, err := dedupepg.New(dedupepg.Config{DB: db, Namespace: "dups"})
			if err != nil {
				t.Fatal(err)
			}
			h := dedupepg.Transactional(s, l.credit, &dedupepg.TxOptions{SkipCompleted: tc.skip})
			m := func(i int) *consumer.Message {
				return consumertest.NewMessage("erin:3", consumertest.WithID(fmt.Sprintf("m%d", i)), consumertest.WithAttribute("sqsonce-id", "once"))
			}
			if r := process(h, m(0)); r.Outcome != consumer.OutcomeAck {
				t.Fatalf("first delivery: %s (%v), want ack", r.Outcome, r.Err)
			}
			db.begins.Store(0)
			for i := range dups {
				if r := process(h, m(i+1)); r.Outcome != consumer.OutcomeDuplicate {
					t.Fatalf("duplicate %d: %s (%v), want duplicate", i+1, r.Outcome, r.Err)
				}
			}
			if n := l.runs.Load(); n != 1 {
				t.Errorf("the function ran %d times for 1 delivery and %d duplicates after its commit, want 1", n, dups)
			}
			if n := db.begins.Load(); n != tc.begins {
				t.Errorf("%d duplicates began %d transactions, want %d", dups, n, tc.begins)
			}
			if b := l.balance(t, "erin"); b != 3 {
				t.Fatalf("balance %d, want 3 (applied once)", b)
			}
		})
	}
}

// TestSkipCompletedRace: two first deliveries of one message that both
// read the row before either commits both go on to the transaction (the
// SELECT is no claim); the row's unique index lets one commit, the other
// waits for it and is a duplicate: the effect once.
func TestSkipCompletedRace(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	// Both deliveries begin (so both are past their read) before either
	// writes the row.
	var begun sync.WaitGroup
	begun.Add(2)
	db := &gatedDB{beginCounter: &beginCounter{Pool: l.pool}, begun: &begun}
	s, err := dedupepg.New(dedupepg.Config{DB: db, Namespace: "race"})
	if err != nil {
		t.Fatal(err)
	}
	h := dedupepg.Transactional(s, l.credit, &dedupepg.TxOptions{SkipCompleted: true})
	var wg sync.WaitGroup
	outcomes := make([]consumertest.Result, 2)
	for i := range outcomes {
		wg.Go(func() {
			outcomes[i] = process(h, consumertest.NewMessage("frank:4", consumertest.WithID(fmt.Sprintf("m%d", i)), consumertest.WithAttribute("sqsonce-id", "race")))
		})
	}
	wg.Wait()
	got := map[consumer.Outcome]int{}
	for _, r := range outcomes {
		got[r.Outcome]++
	}
	if got[consumer.OutcomeAck] != 1 || got[consumer.OutcomeDuplicate] != 1 {
		t.Fatalf("outcomes %s (%v), %s (%v); want one ack and one duplicate", outcomes[0].Outcome, outcomes[0].Err, outcomes[1].Outcome, outcomes[1].Err)
	}
	if n := db.begins.Load(); n != 2 {
		t.Fatalf("%d transactions begun, want 2 (both read before either committed)", n)
	}
	if b, n := l.balance(t, "frank"), l.runs.Load(); b != 4 || n != 1 {
		t.Fatalf("balance %d after %d runs, want 4 after 1 (applied once)", b, n)
	}
}

// gatedDB holds each BeginTx until begun reaches zero.
type gatedDB struct {
	*beginCounter
	begun *sync.WaitGroup
}

func (g *gatedDB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	g.begun.Done()
	g.begun.Wait()
	return g.beginCounter.BeginTx(ctx, opts)
}

// TestSkipCompletedOnlyACompletedRecord: the SELECT skips only a live
// COMPLETED row of the same body. Key reuse, a lease-mode claim in
// progress and an expired row go to the transaction and get its answer,
// as without the option.
func TestSkipCompletedOnlyACompletedRecord(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	db := &beginCounter{Pool: l.pool}
	s, err := dedupepg.New(dedupepg.Config{DB: db, Namespace: "only", NowFunc: clock})
	if err != nil {
		t.Fatal(err)
	}
	h := dedupepg.Transactional(s, l.credit, &dedupepg.TxOptions{SkipCompleted: true})
	run := func(id, key, body string) (consumertest.Result, int64) {
		before := db.begins.Load()
		r := process(h, consumertest.NewMessage(body, consumertest.WithID(id), consumertest.WithAttribute("sqsonce-id", key)))
		return r, db.begins.Load() - before
	}
	if r, n := run("m1", "k", "gina:1"); r.Outcome != consumer.OutcomeAck || n != 1 {
		t.Fatalf("first delivery: %s (%v), %d transactions; want ack, 1", r.Outcome, r.Err, n)
	}
	if r, n := run("m2", "k", "gina:9"); r.Outcome != consumer.OutcomeDeadLetter || n != 1 {
		t.Fatalf("key reuse: %s (%v), %d transactions; want dead-lettered by the transaction, 1", r.Outcome, r.Err, n)
	}
	c, err := s.Claim(context.Background(), "held", dedupe.Fingerprint("gina:2"), time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatal(c, err)
	}
	if r, n := run("m3", "held", "gina:2"); r.Outcome != consumer.OutcomeRetry || n != 1 {
		t.Fatalf("key held by a lease-mode claim: %s (%v), %d transactions; want retry, 1", r.Outcome, r.Err, n)
	}
	mu.Lock()
	now = now.Add(dedupe.DefaultTTL + time.Hour) // k's row expires
	mu.Unlock()
	// The ledger's journal is keyed by the message key: a key used again
	// after its record expired is a new journal line.
	if _, err := l.pool.Exec(context.Background(), `DELETE FROM journal WHERE message_id = 'k'`); err != nil {
		t.Fatal(err)
	}
	if r, n := run("m4", "k", "gina:5"); r.Outcome != consumer.OutcomeAck || n != 1 {
		t.Fatalf("after expiry: %s (%v), %d transactions; want ack, 1", r.Outcome, r.Err, n)
	}
	if b := l.balance(t, "gina"); b != 6 {
		t.Fatalf("balance %d, want 6", b)
	}
}

// failingRead is a pool whose QueryRow (the SELECT outside any
// transaction) fails.
type failingRead struct{ *beginCounter }

type errRow struct{}

func (errRow) Scan(...any) error { return errors.New("read failed") }

func (failingRead) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{} }

// TestSkipCompletedReadFails: the SELECT only saves work. When it fails
// the transaction runs and decides, unless the handler's context is done.
func TestSkipCompletedReadFails(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	db := failingRead{&beginCounter{Pool: l.pool}}
	s, err := dedupepg.New(dedupepg.Config{DB: db, Namespace: "fails"})
	if err != nil {
		t.Fatal(err)
	}
	h := dedupepg.Transactional(s, l.credit, &dedupepg.TxOptions{SkipCompleted: true})
	m := func() *consumer.Message {
		return consumertest.NewMessage("hal:2", consumertest.WithAttribute("sqsonce-id", "k"))
	}
	if r := process(h, m()); r.Outcome != consumer.OutcomeAck || l.runs.Load() != 1 {
		t.Fatalf("failed read: %s (%v) after %d runs, want ack after 1", r.Outcome, r.Err, l.runs.Load())
	}
	if r := process(h, m()); r.Outcome != consumer.OutcomeDuplicate || db.begins.Load() != 2 {
		t.Fatalf("failed read of a completed key: %s (%v), %d transactions; want the transaction's duplicate, 2", r.Outcome, r.Err, db.begins.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Handle(ctx, m()); !errors.Is(err, context.Canceled) || db.begins.Load() != 2 {
		t.Fatalf("read failed with the context done: %v after %d transactions, want context.Canceled and no transaction", err, db.begins.Load())
	}
}
