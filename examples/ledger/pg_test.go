package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// pgConn is a connection on a postgres ledger's schema.
func (l *ledgerCLI) pgConn() *pgx.Conn {
	l.t.Helper()
	cfg, err := pgx.ParseConfig(testenv.PostgresURL(l.t))
	if err != nil {
		l.t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{l.names().Schema}.Sanitize()
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// balances and audit report a row the ledger could not have written as an
// error (exit 1), never skip it: a total that ignores a row is wrong.
func TestPostgresMalformedRows(t *testing.T) {
	t.Parallel()
	l := newLedgerCLIStore(t, false, storePostgres)
	c := l.pgConn()
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO ledger_accounts VALUES ('acct-1', 5)`,
		`ALTER TABLE ledger_accounts ALTER COLUMN balance DROP NOT NULL`,
		`INSERT INTO ledger_accounts VALUES ('acct-2', NULL)`,
		`INSERT INTO ledger_journal VALUES ('credit-1', 'acct-1', 5, 0)`,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, cmd := range []struct{ name, want string }{
		{"balances", `malformed row (account "acct-2", balance NULL)`},
		{"audit", `credit credit-1: malformed row (amount 5, applied 0)`},
	} {
		code, out, errOut := l.run(ctx, cmd.name, "-json")
		if code != 1 || !strings.Contains(errOut, cmd.want) {
			t.Errorf("ledger %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", cmd.name, code, out, errOut, cmd.want)
		}
	}
}

// Every subcommand that needs the ledger's tables says so before setup.
func TestPostgresNotSetUp(t *testing.T) {
	t.Parallel()
	l := newLedgerCLIStore(t, false, storePostgres)
	dropSchema(t, l.names().Schema)
	for _, cmd := range [][]string{{"balances"}, {"audit"}, {"outbox"}, {"work"}, {"relay"}, {"serve", "-addr", "127.0.0.1:0"}} {
		code, _, errOut := l.run(context.Background(), cmd...)
		if code != 1 || !strings.Contains(errOut, "setup") {
			t.Errorf("ledger %v before setup: exit %d, stderr %q; want exit 1 naming setup", cmd, code, errOut)
		}
	}
}

// A key used again after its Idempotency-Key record expired (and was
// pruned) finds the credit it made: the same credit answers it, with no
// second outbox event; another credit under it is refused.
func TestPostgresServeKeyAfterRecordExpired(t *testing.T) {
	t.Parallel()
	l := newLedgerCLIStore(t, false, storePostgres)
	ctx := context.Background()
	n := l.names()
	c, err := newClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.pg, err = openPostgres(ctx, n.Schema, "ledger test"); err != nil {
		t.Fatal(err)
	}
	defer c.close()
	keys, h, err := postgresCredits(ctx, n, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.New(idempotency.Config{Store: keys, BeginTxFunc: keys.BeginTx, ScopeFunc: caller})
	if err != nil {
		t.Fatal(err)
	}
	api := mw.Wrap(h)
	do := func(body string) (int, bool, creditResponse) {
		req := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set(idempotency.HeaderKey, "k1")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		var cr creditResponse
		_ = json.Unmarshal(rec.Body.Bytes(), &cr)
		return rec.Code, rec.Header().Get(idempotency.HeaderReplayed) == "true", cr
	}
	expire := func() {
		t.Helper()
		if _, err := c.pg.Exec(ctx, `DELETE FROM `+pgIdempotencyTable); err != nil {
			t.Fatal(err)
		}
	}
	code1, _, first := do(`{"account":"acct-1","amount":5}`)
	code2, replayed, again := do(`{"account":"acct-1","amount":5}`)
	if code1 != http.StatusCreated || code2 != http.StatusCreated || !replayed || first != again || first.CreditID == "" {
		t.Fatalf("first %d %+v, retry %d replayed=%v %+v; want one 201, replayed", code1, first, code2, replayed, again)
	}
	expire()
	if code, replayed, after := do(`{"account":"acct-1","amount":5}`); code != http.StatusCreated || replayed || after != first {
		t.Fatalf("the key again after its record expired: %d replayed=%v %+v; want the first credit %+v", code, replayed, after, first)
	}
	expire()
	if code, _, _ := do(`{"account":"acct-1","amount":6}`); code != http.StatusConflict {
		t.Errorf("the key's record gone, another credit: %d, want 409", code)
	}
	var rep outboxReport
	if err := json.Unmarshal([]byte(l.ok("outbox", "-json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Pending != 1 {
		t.Errorf("outbox holds %d events, want 1 (one credit)", rep.Pending)
	}
}

// A request whose API process is SIGKILLed while it holds its key frees
// the key as soon as PostgreSQL ends the dead connection's transaction:
// the client's retry to another server runs the credit (201, not 409 for
// a lease), and the credit is made once.
func TestPostgresServeKilledRequestFreesKey(t *testing.T) {
	t.Parallel()
	l := newLedgerCLIStore(t, false, storePostgres)
	n := l.names()
	ctx := context.Background()
	// The handler sleeps an hour, holding the key, until it is killed.
	s1 := l.start(t, "serve", "-addr", "127.0.0.1:0", "-handler-delay", "1h", "-lease", "30s")
	s2 := l.start(t, "serve", "-addr", "127.0.0.1:0")
	body := `{"account":"acct-1","amount":5}`
	sent := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s1.url+"/credits", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set(idempotency.HeaderKey, "k1")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d", resp.StatusCode)
		}
		sent <- err
	}()
	// Wait for s1 to hold the key: an IN_PROGRESS record (a lease), or an
	// advisory lock held by a server's session (the request's transaction).
	pg := l.pgConn()
	app := "ledger serve " + n.Queue
	deadline := time.Now().Add(30 * time.Second)
	for {
		var held bool
		err := pg.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgIdempotencyTable+` WHERE status = 'IN_PROGRESS')
			OR EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1)`, app).Scan(&held)
		if err != nil {
			t.Fatal(err)
		}
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request did not take its key within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The key is taken: a retry meanwhile gets 409.
	if a := post(t, s2.url, "alice", "k1", body); a.status != http.StatusConflict {
		t.Fatalf("a retry while the first request sleeps: %+v, want 409", a)
	}
	s1.kill()
	if err := <-sent; err == nil || strings.Contains(err.Error(), "answered") {
		t.Fatalf("the killed request: %v, want a broken connection", err)
	}
	// Wait for PostgreSQL to end the killed process's sessions (it does as
	// soon as it reads the closed socket); a lease would hold the key 30 s.
	deadline = time.Now().Add(30 * time.Second)
	for {
		var open int
		if err := pg.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, app).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions of the killed server still in a transaction", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := post(t, s2.url, "alice", "k1", body); a.status != http.StatusCreated || a.replayed {
		t.Fatalf("the client's next retry after the kill: %+v, want 201 (the key freed by the dead transaction)", a)
	}
	var credits int
	if err := pg.QueryRow(ctx, `SELECT count(*) FROM `+tableAPICredits).Scan(&credits); err != nil {
		t.Fatal(err)
	}
	var rep outboxReport
	if err := json.Unmarshal([]byte(l.ok("outbox", "-json")), &rep); err != nil {
		t.Fatal(err)
	}
	if credits != 1 || rep.Pending != 1 {
		t.Errorf("%d credits, %d outbox events; want 1 and 1", credits, rep.Pending)
	}
	s2.stop(t)
}
