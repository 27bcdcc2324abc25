package idemdynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/idempotency"
)

// vanished is the store as seen from a process killed right after its
// claim: the claim reached DynamoDB, nothing after it does.
type vanished struct{ idempotency.Store }

var errKilled = errors.New("process killed")

func (vanished) Extend(context.Context, string, string, time.Duration) error { return errKilled }
func (vanished) Complete(context.Context, string, string, idempotency.Completion) error {
	return errKilled
}
func (vanished) Release(context.Context, string, string) error { return errKilled }

// TestVanishedOwnerRetryAfter: on DynamoDB Local, a key whose owner died
// mid-request answers 409 with Retry-After equal to the seconds left on
// the stored lease (rounded up) and a text saying the attempt may have
// stopped and when the key is free; after the lease the retry runs.
func TestVanishedOwnerRetryAfter(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	clock := dedupetest.NewClock(time.Now().Truncate(time.Millisecond))
	store := newStore(t, client, table, clock.Now)
	const lease = 30 * time.Second
	var runs atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	})
	mw := func(s idempotency.Store) http.Handler {
		m, err := idempotency.New(idempotency.Config{
			Store:     s,
			ScopeFunc: func(r *http.Request) (string, error) { return "alice", nil },
			Lease:     lease,
			NowFunc:   clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return m.Wrap(handler)
	}
	send := func(h http.Handler) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":5}`))
		r.Header.Set(idempotency.HeaderKey, "pay-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	send(mw(vanished{store}))

	h := mw(store)
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 30}, {7400 * time.Millisecond, 23}, {21600 * time.Millisecond, 1}, {999 * time.Millisecond, 1}} {
		clock.Advance(step.advance)
		w := send(h)
		if w.Code != http.StatusConflict {
			t.Fatalf("during the dead owner's lease: %d %s, want 409", w.Code, w.Body)
		}
		if got := w.Header().Get("Retry-After"); got != fmt.Sprint(step.want) {
			t.Errorf("Retry-After %q, want %d (the stored lease's end, rounded up)", got, step.want)
		}
		var p struct{ Type, Detail string }
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Type != idempotency.TypeInProgress {
			t.Fatalf("problem %s: %v", w.Body, err)
		}
		want := fmt.Sprintf("a request with this key is in progress or stopped without finishing; its lease ends in %d s", step.want)
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q, want it to contain %q", p.Detail, want)
		}
	}
	clock.Advance(2 * time.Millisecond) // past the lease, at DynamoDB's ms precision
	if w := send(h); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("after the lease: %d %s, want a fresh 201", w.Code, w.Body)
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("runs = %d, want 2 (the vanished attempt and the retry after its lease)", got)
	}
}
