package dedupepg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
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
// Go that the statement can write itself (three parameters: key,
// fingerprint, expiry).
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
		if strings.Contains(dd.SQL, "RETURNING") || len(dd.Args) > 3 {
			t.Fatalf("the dedupe INSERT has %d parameters and RETURNING=%v, want at most 3 and none:\n%s",
				len(dd.Args), strings.Contains(dd.SQL, "RETURNING"), dd.SQL)
		}
	}
	var n int
	if err := base.QueryRow(ctx, `SELECT count(*) FROM sqsonce_dedupe WHERE status = 'COMPLETED' AND lease_until IS NULL AND steps IS NULL`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("COMPLETED dedupe rows = %d, %v; want 2", n, err)
	}
}

// TestTransactionalRareStatements: the answers other than a new row cost
// no more round trips than they did when the INSERT itself took over a
// dead row: a duplicate is BEGIN, the INSERT, a SELECT of the live row
// and ROLLBACK; a dead row (here a lease-mode claim of the same body
// whose owner crashed) is taken over by one more statement, fenced on the
// row as it is then, before the handler runs.
func TestTransactionalRareStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, schema := testenv.PostgresSchema(t)
	if _, err := pgstore.Migrate(ctx, base, pgstore.Dedupe); err != nil {
		t.Fatal(err)
	}
	s, trace := tracedStore(t, base, schema, "rare")
	runs := 0
	h := dedupepg.Transactional(s, func(context.Context, pgx.Tx, *consumer.Message) error { runs++; return nil }, nil)
	kinds := func() string {
		var sqls []string
		for _, q := range trace.take() {
			sqls = append(sqls, strings.Fields(q.SQL)[0])
		}
		return strings.Join(sqls, " ")
	}
	if err := h.Handle(ctx, consumertest.NewMessage("x", consumertest.WithID("m-1"))); err != nil {
		t.Fatal(err)
	}
	_ = kinds()
	err := h.Handle(ctx, consumertest.NewMessage("x", consumertest.WithID("m-1")))
	if !errors.Is(err, consumer.ErrDuplicate) {
		t.Fatalf("the second delivery: %v, want a duplicate", err)
	}
	if got := kinds(); got != "begin INSERT SELECT rollback" {
		t.Fatalf("statements for a duplicate: %q, want begin INSERT SELECT rollback", got)
	}

	crashed, err := dedupepg.New(dedupepg.Config{DB: base, Namespace: "rare",
		NowFunc: func() time.Time { return time.Now().Add(-2 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := crashed.Claim(ctx, "m-2", dedupe.Fingerprint("x"), time.Minute); err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("Claim: %+v %v", c, err)
	}
	if err := h.Handle(ctx, consumertest.NewMessage("x", consumertest.WithID("m-2"))); err != nil {
		t.Fatalf("the delivery after the claim's lease ended: %v, want it applied", err)
	}
	if got := kinds(); got != "begin INSERT SELECT INSERT commit" {
		t.Fatalf("statements for a takeover: %q, want begin INSERT SELECT INSERT commit", got)
	}
	var status, token string
	if err := base.QueryRow(ctx, `SELECT status, token FROM sqsonce_dedupe WHERE pk = $1`, s.PK("m-2")).Scan(&status, &token); err != nil ||
		status != dedupe.StatusCompleted || token != "" || runs != 2 {
		t.Fatalf("after the takeover: %s %q %v, %d runs; want COMPLETED with no token, 2 runs", status, token, err, runs)
	}
}
