package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/idempotency"
)

// vanished is a store seen from a process that was killed right after its
// claim: the claim reached the store, nothing after it does.
type vanished struct{ idempotency.Store }

var errKilled = errors.New("process killed")

func (vanished) Extend(context.Context, string, string, time.Duration) error { return errKilled }
func (vanished) Complete(context.Context, string, string, idempotency.Completion) error {
	return errKilled
}
func (vanished) Release(context.Context, string, string) error { return errKilled }

// problemDetail returns a problem's detail.
func problemDetail(t *testing.T, body string) string {
	t.Helper()
	var p struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	return p.Detail
}

// TestVanishedOwnerRetryAfter: the process that claimed a key died
// mid-request, leaving an IN_PROGRESS record nobody settles. Until its
// lease ends a retry gets 409 whose Retry-After is the seconds left on the
// stored lease (rounded up) and whose text says the attempt may have
// stopped and when the key is free; once the lease has ended the retry
// runs.
func TestVanishedOwnerRetryAfter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemory(idempotency.MemoryConfig{})
		const lease = 30 * time.Second
		c := &credits{}
		dead := newMiddleware(t, idempotency.Config{Store: vanished{store}, Lease: lease}).Wrap(c)
		claimed := time.Now()
		post(dead, http.MethodPost, "/credits", "k", "alice", `{"amount":5}`)
		synctest.Wait()

		h := newMiddleware(t, idempotency.Config{Store: store, Lease: lease}).Wrap(c)
		for _, step := range []struct {
			after time.Duration // since the claim
			want  int           // Retry-After
		}{{0, 30}, {7400 * time.Millisecond, 23}, {29 * time.Second, 1}, {lease - time.Millisecond, 1}} {
			time.Sleep(step.after - time.Since(claimed))
			w := post(h, http.MethodPost, "/credits", "k", "alice", `{"amount":5}`)
			if typ := problemType(t, w, http.StatusConflict); typ != idempotency.TypeInProgress {
				t.Fatalf("%v after the claim: type %s", step.after, typ)
			}
			if got := w.Header().Get("Retry-After"); got != fmt.Sprint(step.want) {
				t.Errorf("%v after the claim: Retry-After %q, want %d (the stored lease's end, rounded up)", step.after, got, step.want)
			}
			detail := problemDetail(t, w.Body.String())
			want := fmt.Sprintf("a request with this key is in progress or stopped without finishing; its lease ends in %d s", step.want)
			if !strings.Contains(detail, want) {
				t.Errorf("%v after the claim: detail %q, want it to contain %q", step.after, detail, want)
			}
		}
		time.Sleep(time.Millisecond + time.Nanosecond)
		if w := post(h, http.MethodPost, "/credits", "k", "alice", `{"amount":5}`); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatalf("after the lease: %d %s, want a fresh 201", w.Code, w.Body)
		}
		if got := c.runs.Load(); got != 2 {
			t.Fatalf("runs = %d, want 2 (the vanished attempt and the retry after its lease)", got)
		}
	})
}
