package idempotency_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/idempotency"
)

// TestTakeoverChecksFingerprint: the first owner dies mid-request, its
// effects unknown. After its lease, a request with the same key and
// another body is key reuse (422), not a takeover: the key still belongs
// to the original request, whose retry then runs.
func TestTakeoverChecksFingerprint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemory(idempotency.MemoryConfig{})
		dead := newBlocking()
		defer func() {
			close(dead.finish) // let the dead owner's goroutine end
			synctest.Wait()
		}()
		crashed := newMiddleware(t, idempotency.Config{Store: &flaky{Store: store, failExtend: true}, Lease: 10 * time.Second}).Wrap(dead)
		go post(crashed, http.MethodPost, "/credits", "k", "alice", `{"amount":5}`)
		<-dead.started

		c := &credits{}
		h := newMiddleware(t, idempotency.Config{Store: store, Lease: 10 * time.Second}).Wrap(c)
		time.Sleep(10*time.Second + time.Millisecond)
		if w := post(h, http.MethodPost, "/credits", "k", "alice", `{"amount":999}`); w.Code != http.StatusUnprocessableEntity {
			t.Fatalf("another body after the dead owner's lease: %d %s, want 422", w.Code, w.Body)
		}
		if w := post(h, http.MethodPost, "/credits", "k", "alice", `{"amount":5}`); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatalf("the original request's retry: %d %s, want a fresh 201", w.Code, w.Body)
		}
		if c.runs.Load() != 1 {
			t.Fatalf("runs = %d, want 1 (the original request's retry)", c.runs.Load())
		}
	})
}
