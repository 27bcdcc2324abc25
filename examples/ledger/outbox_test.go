package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
)

// putEvents commits evs to the ledger's outbox, as serve does.
func (l *ledgerCLI) putEvents(evs ...outbox.Event) {
	l.t.Helper()
	ctx := context.Background()
	n := l.names()
	if l.store == storePostgres {
		pool, err := openPostgres(ctx, n.Schema, "ledger test")
		if err != nil {
			l.t.Fatal(err)
		}
		defer pool.Close()
		st, err := outboxpg.New(outboxpg.Config{DB: pool})
		if err != nil {
			l.t.Fatal(err)
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Put(ctx, tx, evs...) }); err != nil {
			l.t.Fatal(err)
		}
		return
	}
	st, err := outboxdynamo.New(outboxdynamo.Config{Client: testenv.Dynamo(l.t), Table: n.Outbox})
	if err != nil {
		l.t.Fatal(err)
	}
	if err := st.Commit(ctx, func() ([]types.TransactWriteItem, error) { return st.Put(evs...) }); err != nil {
		l.t.Fatal(err)
	}
}

// outboxReport reads `ledger outbox -json`.
func (l *ledgerCLI) outboxReport(args ...string) outboxReport {
	l.t.Helper()
	var rep outboxReport
	if err := json.Unmarshal([]byte(l.ok(append([]string{"outbox", "-json"}, args...)...)), &rep); err != nil {
		l.t.Fatal(err)
	}
	return rep
}

// waitOutbox polls `ledger outbox -json` until done says so.
func (l *ledgerCLI) waitOutbox(what string, done func(outboxReport) bool) {
	l.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rep := l.outboxReport()
		if done(rep) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("outbox %+v after a minute, want %s", rep, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOutboxDiscard: a credit SQS can never take is parked at once and
// holds back its account's later credit; `ledger outbox -discard ID`
// drops it, and the later credit goes out.
func TestOutboxDiscard(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			l := newLedgerCLIStore(t, true, store)
			l.putEvents(
				outbox.Event{ID: "poison", Entity: "acct-1", Type: "credit", Payload: "a\x01b"},
				outbox.Event{ID: "later", Entity: "acct-1", Type: "credit", Payload: `{"id":"later","account":"acct-1","amount":5}`},
				outbox.Event{ID: "other", Entity: "acct-2", Type: "credit", Payload: `{"id":"other","account":"acct-2","amount":7}`},
			)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				if code, _, stderr := l.run(ctx, "relay", "-log-level", "error"); code != 0 {
					t.Errorf("relay exited %d:\n%s", code, lastLines(stderr, 10))
				}
			})
			defer func() { cancel(); wg.Wait() }()
			l.waitOutbox("poison parked, later pending behind it", func(r outboxReport) bool {
				return r.Dead == 1 && r.Pending == 1 && len(r.DeadEventIDs) == 1 && r.DeadEventIDs[0] == "poison"
			})
			code, _, stderr := l.run(context.Background(), "outbox", "-discard", "nope")
			if code != 1 || !strings.Contains(stderr, "no dead event") {
				t.Fatalf("outbox -discard nope: exit %d %q, want 1 and that no dead event has the id", code, stderr)
			}
			if out := l.ok("outbox", "-discard", "poison"); !strings.Contains(out, "discarded poison") {
				t.Fatalf("outbox -discard poison printed %q", out)
			}
			l.waitOutbox("nothing left", func(r outboxReport) bool { return r.Dead == 0 && r.Pending == 0 })
			var st queueStatus
			if err := json.Unmarshal([]byte(l.ok("status", "-json")), &st); err != nil {
				t.Fatal(err)
			}
			if st.Visible != 2 {
				t.Fatalf("the queue holds %d credits, want 2 (later and other)", st.Visible)
			}
		})
	}
}
