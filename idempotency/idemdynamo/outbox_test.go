package idemdynamo_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
)

// TestTransactWithOutbox: an outbox event joins the handler's writes
// through Transact like any other write: it is pending once the request
// committed, absent when the commit was cancelled, and not written again
// by a replay.
func TestTransactWithOutbox(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	table := newOutbox(t, a)
	ob := outboxStore(t, a, table, time.Now)
	pending := func() int { return pendingEvents(t, ob) }
	var runs atomic.Int64
	h := a.middleware(t).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := string(body)
		runs.Add(1)
		events, err := ob.Put(outbox.Event{Entity: "acct-1", Type: "credit", Payload: id})
		if err != nil {
			t.Errorf("outbox Put: %v", err)
		}
		if err := idemdynamo.Transact(r.Context(), append(events, a.putCredit(id))...); err != nil {
			t.Errorf("Transact: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, id)
	}))
	if w := send(h, "k1", "credit-1"); w.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	if got := pending(); got != 1 {
		t.Fatalf("pending events after a commit = %d, want 1", got)
	}
	if w := send(h, "k1", "credit-1"); w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("retry: %d, want a replay", w.Code)
	}
	// credit-1 exists: the second key's transaction is cancelled, event
	// included.
	if w := send(h, "k2", "credit-1"); w.Code != http.StatusConflict {
		t.Fatalf("conflicting credit: %d %s, want 409", w.Code, w.Body)
	}
	if got := pending(); got != 1 || runs.Load() != 2 {
		t.Fatalf("pending events = %d, runs %d: want 1 and 2", got, runs.Load())
	}
}

func newOutbox(t *testing.T, a *api) string {
	t.Helper()
	table := testenv.Name("sqsonce-idem-outbox")
	if err := outboxdynamo.CreateTable(context.Background(), a.client, table); err != nil {
		t.Fatalf("outbox CreateTable: %v", err)
	}
	t.Cleanup(func() {
		_, _ = a.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return table
}

func outboxStore(t *testing.T, a *api, table string, now func() time.Time) *outboxdynamo.Store {
	t.Helper()
	ob, err := outboxdynamo.New(outboxdynamo.Config{Client: a.client, Table: table, NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

func pendingEvents(t *testing.T, ob *outboxdynamo.Store) int {
	t.Helper()
	st, err := ob.Stats(context.Background())
	if err != nil {
		t.Fatalf("outbox stats: %v", err)
	}
	return st.Pending
}

// TestTransactFuncRebuildsOutbox: another writer (its clock an hour ahead)
// committed an event of the same entity first, so the request's event,
// stamped earlier, fails the outbox's order condition. Handed over with
// Transact, the request answers 409; with TransactFunc and the outbox's
// IsOrderConflict, the event is built again, stamped after the other, and
// the request commits with it.
func TestTransactFuncRebuildsOutbox(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	table := newOutbox(t, a)
	ob := outboxStore(t, a, table, time.Now)
	ahead := outboxStore(t, a, table, func() time.Time { return time.Now().Add(time.Hour) })
	ctx := context.Background()
	writeAhead := func() {
		t.Helper()
		if err := ahead.Commit(ctx, func() ([]types.TransactWriteItem, error) {
			return ahead.Put(outbox.Event{Entity: "acct-1", Payload: "ahead"})
		}); err != nil {
			t.Fatalf("the other writer: %v", err)
		}
	}
	var builds atomic.Int64
	useFunc := false
	h := a.middleware(t).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var err error
		if useFunc {
			err = idemdynamo.TransactFunc(r.Context(), func() ([]types.TransactWriteItem, error) {
				builds.Add(1)
				return ob.Put(outbox.Event{Entity: "acct-1", Payload: string(body)})
			}, ob.IsOrderConflict)
		} else {
			var events []types.TransactWriteItem
			if events, err = ob.Put(outbox.Event{Entity: "acct-1", Payload: string(body)}); err == nil {
				err = idemdynamo.Transact(r.Context(), events...)
			}
		}
		if err != nil {
			t.Errorf("transact: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
	}))

	writeAhead()
	if w := send(h, "k1", "static"); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), idempotency.TypeWriteConflict) {
		t.Fatalf("Transact after the other writer: %d %s, want 409 %s", w.Code, w.Body, idempotency.TypeWriteConflict)
	}
	if got := pendingEvents(t, ob); got != 1 {
		t.Fatalf("pending %d, want only the other writer's event", got)
	}

	useFunc = true
	writeAhead()
	if w := send(h, "k2", "built"); w.Code != http.StatusCreated {
		t.Fatalf("TransactFunc after the other writer: %d %s, want 201", w.Code, w.Body)
	}
	if builds.Load() != 2 {
		t.Fatalf("builds %d, want 2 (one cancelled by the order conflict, one committed)", builds.Load())
	}
	if got := pendingEvents(t, ob); got != 3 || testenv.Scalar(a.record(t, "k2")["status"]) != "COMPLETED" {
		t.Fatalf("pending %d, want 3, with the key completed", got)
	}
}
