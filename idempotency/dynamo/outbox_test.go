package dynamo_test

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	outboxdynamo "github.com/sqsonce/sqsonce/outbox/dynamo"
)

// TestTransactWithOutbox: an outbox event joins the handler's writes
// through Transact like any other write: it is pending once the request
// committed, absent when the commit was cancelled, and not written again
// by a replay.
func TestTransactWithOutbox(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	table := testenv.Name("sqsonce-idem-outbox")
	if err := outboxdynamo.CreateTable(ctx, a.client, table); err != nil {
		t.Fatalf("outbox CreateTable: %v", err)
	}
	t.Cleanup(func() {
		_, _ = a.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	ob, err := outboxdynamo.New(outboxdynamo.Config{Client: a.client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		t.Helper()
		st, err := ob.Stats(ctx)
		if err != nil {
			t.Fatalf("outbox stats: %v", err)
		}
		return st.Pending
	}
	var runs atomic.Int64
	h := a.middleware(t).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := string(body)
		runs.Add(1)
		events, err := ob.Put(outbox.Event{Entity: "acct-1", Type: "credit", Payload: id})
		if err != nil {
			t.Errorf("outbox Put: %v", err)
		}
		if err := idempotency.Transact(r.Context(), append(events, a.putCredit(id))...); err != nil {
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
