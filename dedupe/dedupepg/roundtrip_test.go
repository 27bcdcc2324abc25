package dedupepg_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// statements records every statement sent on a pool (a pgx.QueryTracer):
// each is one round trip.
type statements struct {
	mu   sync.Mutex
	sent []pgx.TraceQueryStartData
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, data)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) take() []pgx.TraceQueryStartData {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// tracedStore returns a Store named namespace on a one-connection pool to
// schema whose statements are recorded.
func tracedStore(t *testing.T, base *pgxpool.Pool, schema, namespace string) (*dedupepg.Store, *statements) {
	t.Helper()
	trace := &statements{}
	cfg := base.Config()
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.Tracer = trace
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	return s, trace
}

// TestTransactionalStatements: a new message costs what the textbook
// transaction does, BEGIN, one INSERT of the dedupe row, the handler's
// statements and COMMIT (five round trips here), and the dedupe INSERT is
// answered by its command tag alone: no RETURNING, no values computed in
// Go that the statement can write itself (four parameters: key,
// fingerprint, expiry, now).
func TestTransactionalStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, schema := testenv.PostgresSchema(t)
	if _, err := pgstore.Migrate(ctx, base, pgstore.Dedupe); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Exec(ctx, `CREATE TABLE journal (message_id text PRIMARY KEY);
		CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL); INSERT INTO accounts VALUES ('a', 0)`); err != nil {
		t.Fatal(err)
	}
	s, trace := tracedStore(t, base, schema, "rt")
	h := dedupepg.Transactional(s, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		if _, err := tx.Exec(ctx, `INSERT INTO journal VALUES ($1)`, msg.Key()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = 'a'`)
		return err
	}, nil)
	for i, id := range []string{"m-1", "m-2"} {
		if err := h.Handle(ctx, consumertest.NewMessage("x", consumertest.WithID(id))); err != nil {
			t.Fatalf("Handle %s: %v", id, err)
		}
		sent := trace.take()
		if i == 0 {
			continue // the first fills the connection's statement cache
		}
		var sqls []string
		for _, q := range sent {
			sqls = append(sqls, strings.Fields(q.SQL)[0])
		}
		if got := strings.Join(sqls, " "); got != "begin INSERT INSERT UPDATE commit" {
			t.Fatalf("statements per message: %q (%d round trips), want the textbook's 5: begin INSERT INSERT UPDATE commit", got, len(sent))
		}
		dd := sent[1]
		if strings.Contains(dd.SQL, "RETURNING") || len(dd.Args) > 4 {
			t.Fatalf("the dedupe INSERT has %d parameters and RETURNING=%v, want at most 4 and none:\n%s",
				len(dd.Args), strings.Contains(dd.SQL, "RETURNING"), dd.SQL)
		}
	}
	var n int
	if err := base.QueryRow(ctx, `SELECT count(*) FROM sqsonce_dedupe WHERE status = 'COMPLETED' AND lease_until IS NULL AND steps IS NULL`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("COMPLETED dedupe rows = %d, %v; want 2", n, err)
	}
}
