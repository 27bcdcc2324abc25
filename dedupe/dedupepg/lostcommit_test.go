package dedupepg_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
)

// lossyDB commits the first transaction but reports the commit as failed,
// as when the connection drops after the server committed and before its
// answer arrived.
type lossyDB struct {
	*pgxpool.Pool
	lost atomic.Bool
}

func (d *lossyDB) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	tx, err := d.Pool.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return &lossyTx{Tx: tx, db: d}, nil
}

type lossyTx struct {
	pgx.Tx
	db *lossyDB
}

func (t *lossyTx) Commit(ctx context.Context) error {
	if err := t.Tx.Commit(ctx); err != nil {
		return err
	}
	if t.db.lost.CompareAndSwap(false, true) {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// A commit whose answer is lost is run again: the dedupe row, committed
// with the effect, makes the rerun a duplicate, so the message is acked and
// the effect stays applied once.
func TestTransactionalLostCommitAnswer(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	db := &lossyDB{Pool: l.pool}
	s, err := dedupepg.New(dedupepg.Config{DB: db, Namespace: "ledger"})
	if err != nil {
		t.Fatal(err)
	}
	h := dedupepg.Transactional(s, l.credit, nil)
	r := process(h, consumertest.NewMessage("acct:7", consumertest.WithID("m-1")))
	if r.Outcome != consumer.OutcomeDuplicate {
		t.Fatalf("outcome %v (%v), want duplicate (the lost commit had applied)", r.Outcome, r.Err)
	}
	if !db.lost.Load() {
		t.Fatal("the commit's answer was never lost: the test did not run its case")
	}
	if b, n := l.balance(t, "acct"), l.count(t, "journal"); b != 7 || n != 1 {
		t.Fatalf("balance %d, %d journal lines; want 7 and 1 (applied once)", b, n)
	}
	if n := l.runs.Load(); n != 1 {
		t.Fatalf("credit ran %d times, want 1", n)
	}
}
