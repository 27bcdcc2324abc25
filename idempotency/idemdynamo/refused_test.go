package idemdynamo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
)

// problemOf decodes a problem+json answer.
func problemOf(t *testing.T, w *httptest.ResponseRecorder) (typ, detail string) {
	t.Helper()
	var p struct{ Type, Detail string }
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("%d %q: not a problem: %v", w.Code, w.Body, err)
	}
	return p.Type, p.Detail
}

// TestRefusedWritesAreFinal: writes DynamoDB can never accept (more than a
// transaction holds, an invalid item) answer 500 without Retry-After, not
// 503 "try again"; nothing is written and the key is released.
func TestRefusedWritesAreFinal(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	for name, writes := range map[string]func(key string) []types.TransactWriteItem{
		"100 writes": func(key string) []types.TransactWriteItem {
			var ws []types.TransactWriteItem
			for i := range idemdynamo.MaxTransactItems {
				ws = append(ws, a.putCredit(fmt.Sprintf("%s-%d", key, i)))
			}
			return ws
		},
		"validation": func(key string) []types.TransactWriteItem {
			return []types.TransactWriteItem{a.putCredit(key), {Put: &types.Put{
				TableName: aws.String(a.credits),
				Item:      map[string]types.AttributeValue{"amount": &types.AttributeValueMemberN{Value: "5"}}, // no key
			}}}
		},
	} {
		var runs atomic.Int64
		key := strings.ReplaceAll(name, " ", "-")
		h := a.middleware(t).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			if err := idemdynamo.Transact(r.Context(), writes(key)...); err != nil {
				t.Errorf("Transact: %v", err)
			}
			w.WriteHeader(http.StatusCreated)
		}))
		w := send(h, key, "x")
		typ, _ := problemOf(t, w)
		if w.Code != http.StatusInternalServerError || w.Header().Get("Retry-After") != "" || typ != idempotency.TypeCommitRefused {
			t.Errorf("%s: %d %s Retry-After %q, want 500 commit-refused without Retry-After", name, w.Code, typ, w.Header().Get("Retry-After"))
		}
		if a.credit(t, key) != nil || a.credit(t, key+"-0") != nil {
			t.Errorf("%s: a refused write committed", name)
		}
		if rec := a.record(t, key); rec != nil {
			t.Errorf("%s: key record %v, want it released", name, rec)
		}
	}
}

// lostAnswer is a DynamoDB client whose TransactWriteItems is applied but
// whose answer is lost (the connection broke on the way back).
type lostAnswer struct {
	*dynamodb.Client
}

func (l lostAnswer) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if _, err := l.Client.TransactWriteItems(ctx, in, optFns...); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("read tcp 127.0.0.1:8000: %w", io.ErrUnexpectedEOF)
}

// TestCommitOutcomeUnknown: a commit whose answer was lost may have been
// applied: the client is told the outcome is unknown, never that nothing
// was committed, and its retry replays the committed response.
func TestCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	s, err := idemdynamo.New(idemdynamo.Config{Client: lostAnswer{a.client}, Table: a.keys, Namespace: "api", NowFunc: a.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	m, err := idempotency.New(idempotency.Config{
		Store:     s,
		ScopeFunc: func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
		Lease:     30 * time.Second,
		NowFunc:   a.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if err := idemdynamo.Transact(r.Context(), a.putCredit("unknown")); err != nil {
			t.Errorf("Transact: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "credited")
	}))
	w := send(h, "k1", "x")
	typ, detail := problemOf(t, w)
	if w.Code != http.StatusServiceUnavailable || typ != idempotency.TypeOutcomeUnknown || strings.Contains(detail, "nothing was committed") {
		t.Fatalf("lost answer: %d %s %q, want 503 outcome-unknown", w.Code, typ, detail)
	}
	if a.credit(t, "unknown") == nil {
		t.Fatal("the test's commit did not happen")
	}
	if w := send(h, "k1", "x"); w.Code != http.StatusCreated || w.Body.String() != "credited" || runs.Load() != 1 {
		t.Fatalf("retry: %d %q after %d runs, want the committed response replayed", w.Code, w.Body, runs.Load())
	}
}
