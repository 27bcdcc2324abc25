package dedupepg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// The grants the package documents are enough for every call a worker
// makes, and nothing more is needed.
func TestDocumentedPrivilegesSuffice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	worker := testenv.PostgresRole(t, pool,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON sqsonce_dedupe TO %[1]s",
		"GRANT INSERT ON effects TO %[1]s")
	s, err := dedupepg.New(dedupepg.Config{DB: worker, Namespace: "priv"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	c, err := s.Claim(ctx, "k", "f", time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("Claim: %+v %v", c, err)
	}
	if err := s.Extend(ctx, "k", c.Token, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := s.Complete(ctx, "k", c.Token); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if c, err := s.Claim(ctx, "k", "f", time.Minute); err != nil || c.Status != dedupe.Duplicate {
		t.Fatalf("Claim again: %+v %v", c, err)
	}
	c, err = s.Claim(ctx, "k2", "f", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "k2", c.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	h := dedupepg.Transactional(s, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, msg.Key())
		return err
	}, nil)
	if r := consumertest.Process(ctx, h, consumertest.NewMessage("b", consumertest.WithID("m"))); r.Outcome != consumer.OutcomeAck {
		t.Fatalf("Transactional: %v (%v)", r.Outcome, r.Err)
	}
	if _, err := s.Prune(ctx, pgstore.PruneOptions{}); err != nil {
		t.Fatalf("Prune: %v", err)
	}
	// Migrate needs more than the worker has.
	if _, err := pgstore.Migrate(ctx, worker, pgstore.Dedupe); err == nil {
		t.Fatal("the worker's role could run Migrate")
	}
}
