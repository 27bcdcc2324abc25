package idemdynamo_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
	"github.com/sqsonce/sqsonce/internal/dynamolease"
)

// TestTransactOutsideRequest: Transact and TransactFunc report a context
// that holds no key instead of dropping the writes.
func TestTransactOutsideRequest(t *testing.T) {
	t.Parallel()
	if err := idemdynamo.Transact(context.Background()); !errors.Is(err, idempotency.ErrNoKey) {
		t.Fatalf("Transact outside a request: %v", err)
	}
	if err := idemdynamo.Transact(context.Background(), types.TransactWriteItem{}); !errors.Is(err, idempotency.ErrNoKey) {
		t.Fatalf("Transact of a write outside a request: %v", err)
	}
	if err := idemdynamo.TransactFunc(context.Background(), nil, nil); !errors.Is(err, idempotency.ErrNoKey) {
		t.Fatalf("TransactFunc outside a request: %v", err)
	}
}

// TestTransactOnMemory: the memory store cannot commit DynamoDB writes:
// the client gets a 500 problem, not the handler's success, whether the
// writes are fixed (Transact) or built (TransactFunc).
func TestTransactOnMemory(t *testing.T) {
	t.Parallel()
	for name, attach := range map[string]func(context.Context) error{
		"Transact": func(ctx context.Context) error { return idemdynamo.Transact(ctx, types.TransactWriteItem{}) },
		"TransactFunc": func(ctx context.Context) error {
			return idemdynamo.TransactFunc(ctx, func() ([]types.TransactWriteItem, error) { return nil, nil }, nil)
		},
	} {
		mw, err := idempotency.New(idempotency.Config{
			Store:     idempotency.NewMemory(idempotency.MemoryConfig{}),
			ScopeFunc: func(*http.Request) (string, error) { return "alice", nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := attach(r.Context()); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			w.WriteHeader(http.StatusCreated)
		}))
		req := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader("{}"))
		req.Header.Set(idempotency.HeaderKey, "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), idempotency.TypeCommitRefused) {
			t.Errorf("%s on the memory store: %d %s, want 500 %s", name, w.Code, w.Body, idempotency.TypeCommitRefused)
		}
	}
}

// TestCompleteRefusesForeignWork: work another package attached is not
// DynamoDB writes: refused before any call.
func TestCompleteRefusesForeignWork(t *testing.T) {
	t.Parallel()
	s, err := idemdynamo.New(idemdynamo.Config{Client: &dynamodb.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Complete(context.Background(), "k", "tok", idempotency.Completion{Work: []any{"an SQL statement"}})
	if !errors.Is(err, idempotency.ErrWorkUnsupported) {
		t.Fatalf("Complete with foreign work: %v, want ErrWorkUnsupported", err)
	}
}

// TestAttributesAreTheLeaseRecords: the key record's lease attributes are
// the dedupe record's, so one table holds both.
func TestAttributesAreTheLeaseRecords(t *testing.T) {
	t.Parallel()
	got := []string{idemdynamo.AttrPK, idemdynamo.AttrStatus, idemdynamo.AttrLeaseUntil, idemdynamo.AttrToken, idemdynamo.AttrFingerprint, idemdynamo.AttrExpiresAt}
	want := []string{dynamolease.AttrPK, dynamolease.AttrStatus, dynamolease.AttrLeaseUntil, dynamolease.AttrToken, dynamolease.AttrFingerprint, dynamolease.AttrExpiresAt}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("attribute %d: %q, the lease record's is %q", i, got[i], want[i])
		}
	}
}
