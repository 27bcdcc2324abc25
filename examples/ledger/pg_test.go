package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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

// A request whose credit committed but whose response was never stored
// (the process died between the two) runs again when the key is retried:
// it answers the same credit and writes no second outbox event.
func TestPostgresServeRerunAfterLostResponse(t *testing.T) {
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
	_, h, err := postgresCredits(ctx, n, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	// No middleware: no response is stored, as after a crash.
	do := func(body string) (int, creditResponse) {
		req := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set(idempotency.HeaderKey, "k1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var cr creditResponse
		_ = json.Unmarshal(rec.Body.Bytes(), &cr)
		return rec.Code, cr
	}
	code1, first := do(`{"account":"acct-1","amount":5}`)
	code2, again := do(`{"account":"acct-1","amount":5}`)
	if code1 != http.StatusCreated || code2 != http.StatusCreated || first != again || first.CreditID == "" {
		t.Fatalf("first %d %+v, again %d %+v; want the same 201 twice", code1, first, code2, again)
	}
	if code, _ := do(`{"account":"acct-1","amount":6}`); code != http.StatusConflict {
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
