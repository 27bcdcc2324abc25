package idempg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqsonce/sqsonce/idempotency"
)

// commitTx is a pgx.Tx whose Commit fails with err.
type commitTx struct {
	pgx.Tx
	err error
}

func (c commitTx) Commit(context.Context) error { return c.err }

// TestCommitOutcome: a commit the server answered, or never sent, did not
// commit; one whose connection broke after it was sent may have, and says
// so with idempotency.ErrOutcomeUnknown.
func TestCommitOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     error
		unknown bool
	}{
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"rolled back", pgx.ErrTxCommitRollback, false},
		{"connection lost", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"timeout", context.DeadlineExceeded, true},
	} {
		err := (&requestTx{tx: commitTx{err: tc.err}}).Commit(context.Background())
		if err == nil || !errors.Is(err, tc.err) || errors.Is(err, idempotency.ErrOutcomeUnknown) != tc.unknown {
			t.Errorf("%s: Commit = %v, want outcome unknown: %v", tc.name, err, tc.unknown)
		}
	}
	if err := (&requestTx{tx: commitTx{}}).Commit(context.Background()); err != nil {
		t.Errorf("a commit that succeeded: %v", err)
	}
}
