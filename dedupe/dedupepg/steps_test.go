package dedupepg_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/step"
)

// stepsThenTx is a handler under dedupe.Middleware with s: step "charge"
// (counted in charges, its first answer lost when lose is set), then the
// credit in Transactional of the same store, which completes the claimed
// record in the credit's transaction.
func stepsThenTx(l *ledger, s *dedupepg.Store, charges *atomic.Int64, lose *atomic.Bool) consumer.Handler {
	charged := map[string]bool{}
	tx := dedupepg.Transactional(s, l.credit, nil)
	return consumer.Chain(consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		_, err := step.Run(ctx, "charge", step.Options{
			ReconcileFunc: func(context.Context) (step.Reconciliation, error) {
				if charged[msg.Key()] {
					return step.Done([]byte("ch")), nil
				}
				return step.NotDone(), nil
			},
		}, func(context.Context) ([]byte, error) {
			charges.Add(1)
			charged[msg.Key()] = true
			if lose != nil && lose.CompareAndSwap(true, false) {
				return nil, io.ErrUnexpectedEOF
			}
			return []byte("ch"), nil
		})
		if err != nil {
			return err
		}
		return tx.Handle(ctx, msg)
	}), stepsWrap(s, dedupe.Config{}))
}

// The final step completes the claimed record in the credit's
// transaction: the credit and COMPLETED commit together, the charge
// before them happens once, a charge whose answer was lost is reconciled,
// and a redelivery is a duplicate.
func TestStepsWithTransactionalFinalStep(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	var charges atomic.Int64
	var lose atomic.Bool
	lose.Store(true)
	h := stepsThenTx(l, l.store, &charges, &lose)
	msg := func(id string) *consumer.Message { return consumertest.NewMessage("acct:5", consumertest.WithID(id)) }
	if r := process(h, msg("m-1")); r.Outcome != consumer.OutcomeRetry {
		t.Fatalf("lost charge answer: %s %v, want a retry", r.Outcome, r.Err)
	}
	if r := process(h, msg("m-1")); r.Outcome != consumer.OutcomeAck {
		t.Fatalf("retry: %s %v, want ack", r.Outcome, r.Err)
	}
	if r := process(h, msg("m-1")); r.Outcome != consumer.OutcomeDuplicate {
		t.Fatalf("redelivery: %s %v, want duplicate", r.Outcome, r.Err)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("charged %d times, want 1", n)
	}
	if b, n := l.balance(t, "acct"), l.count(t, "journal"); b != 5 || n != 1 {
		t.Fatalf("balance %d, %d journal lines; want 5 and 1", b, n)
	}
	var status string
	var steps []byte
	if err := l.pool.QueryRow(context.Background(), `SELECT status, steps FROM `+l.store.Table()+` WHERE pk = $1`, l.store.PK("m-1")).Scan(&status, &steps); err != nil {
		t.Fatal(err)
	}
	if status != dedupe.StatusCompleted || len(steps) == 0 {
		t.Fatalf("record %s with steps %s, want COMPLETED with the charge", status, steps)
	}
}

// A commit whose answer is lost under a claim: the transaction runs again,
// finds the record completed by its own token, and the message is acked
// with the credit applied once.
func TestStepsTransactionalLostCommitAnswer(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	db := &lossyDB{Pool: l.pool}
	s, err := dedupepg.New(dedupepg.Config{DB: db, Namespace: "ledger"})
	if err != nil {
		t.Fatal(err)
	}
	var charges atomic.Int64
	h := stepsThenTx(l, s, &charges, nil)
	if r := process(h, consumertest.NewMessage("acct:7", consumertest.WithID("m-1"))); r.Outcome != consumer.OutcomeAck {
		t.Fatalf("outcome %s (%v), want ack", r.Outcome, r.Err)
	}
	if !db.lost.Load() {
		t.Fatal("the commit's answer was never lost: the test did not run its case")
	}
	if b, n := l.balance(t, "acct"), l.count(t, "journal"); b != 7 || n != 1 || charges.Load() != 1 {
		t.Fatalf("balance %d, %d journal lines, %d charges; want 7, 1, 1", b, n, charges.Load())
	}
}

// A claim taken over before the final step commits nothing: the stale
// owner's transaction finds the record no longer its own.
func TestStepsTransactionalLeaseLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t)
	now := time.Now()
	clock := func() time.Time { return now }
	s, err := dedupepg.New(dedupepg.Config{DB: l.pool, Namespace: "ledger", NowFunc: clock})
	if err != nil {
		t.Fatal(err)
	}
	tx := dedupepg.Transactional(s, l.credit, nil)
	h := consumer.Chain(consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		// Another delivery takes the key over while this one runs.
		now = now.Add(2 * time.Minute)
		if c, err := s.Claim(ctx, msg.Key(), dedupe.Fingerprint(msg.Body), time.Minute); err != nil || c.Status != dedupe.Claimed {
			return fmt.Errorf("takeover: %+v %v", c, err)
		}
		return tx.Handle(ctx, msg)
	}), stepsWrap(s, dedupe.Config{NowFunc: clock}))
	r := consumertest.Process(ctx, h, consumertest.NewMessage("acct:3", consumertest.WithID("m-1")))
	if r.Outcome != consumer.OutcomeRetry || !errors.Is(r.Err, dedupe.ErrNotOwner) {
		t.Fatalf("outcome %s (%v), want a retry with ErrNotOwner", r.Outcome, r.Err)
	}
	if n := l.count(t, "journal"); n != 0 {
		t.Fatalf("%d journal lines: the stale owner committed", n)
	}
}

// stepsWrap is the dedupe middleware of cfg with store (New refuses no
// config these tests give it).
func stepsWrap(store dedupe.Store, cfg dedupe.Config) consumer.Middleware {
	cfg.Store = store
	m, err := dedupe.New(cfg)
	if err != nil {
		panic(err)
	}
	return m.Wrap
}
