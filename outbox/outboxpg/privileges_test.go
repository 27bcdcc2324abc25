package outboxpg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/pgstore"
)

// The grants the package documents are enough for a writer and a relay.
func TestDocumentedPrivilegesSuffice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	writer := testenv.PostgresRole(t, pool,
		"GRANT SELECT, INSERT, UPDATE ON sqsonce_outbox_entities TO %[1]s",
		"GRANT INSERT ON sqsonce_outbox TO %[1]s")
	w := newStore(t, writer, outboxpg.Config{})
	for i := range 2 {
		if err := pgx.BeginFunc(ctx, writer, func(tx pgx.Tx) error {
			return w.Put(ctx, tx, outbox.Event{Entity: "a", Payload: "x"}, outbox.Event{Entity: "b", Payload: "y"})
		}); err != nil {
			t.Fatalf("Put %d as the writer: %v", i, err)
		}
	}
	relayPool := testenv.PostgresRole(t, pool,
		"GRANT SELECT, UPDATE, DELETE ON sqsonce_outbox TO %[1]s",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON sqsonce_outbox_leases, sqsonce_outbox_relays TO %[1]s",
		"GRANT SELECT, UPDATE, DELETE ON sqsonce_outbox_entities TO %[1]s")
	r := newStore(t, relayPool, outboxpg.Config{})
	evs, err := r.Due(ctx, "r1", 10)
	if err != nil || len(evs) != 2 {
		t.Fatalf("Due as the relay: %d events, %v", len(evs), err)
	}
	evs[0].Attempts = 1
	if err := r.Failed(ctx, evs[0], "x", evs[0].CreatedAt, true); err != nil {
		t.Fatalf("Failed: %v", err)
	}
	if err := r.Published(ctx, evs[1:]); err != nil {
		t.Fatalf("Published: %v", err)
	}
	if _, err := r.Stats(ctx); err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if n, err := r.Requeue(ctx); err != nil || n != 1 {
		t.Fatalf("Requeue: %d %v", n, err)
	}
	drainIDs(t, r, "r1")
	if n, err := r.Prune(ctx, pgstore.PruneOptions{}); err != nil || n != 2 {
		t.Fatalf("Prune: %d %v", n, err)
	}
	if err := r.Release(ctx, "r1"); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
