package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/step"
)

// payments is a downstream that charges on every call (no dedupe by key),
// can drop its answer after charging or hang after it, and answers
// whether a ref was charged.
type payments struct {
	mu      sync.Mutex
	charges map[string]int
	drop    int           // answers to drop after charging
	hang    chan struct{} // when set, the next call hangs after charging until it is closed
	hung    chan struct{} // closed when a call hangs
}

func newPayments() *payments { return &payments{charges: map[string]int{}} }

func (p *payments) charge(ref string) ([]byte, error) {
	p.mu.Lock()
	p.charges[ref]++
	drop := p.drop > 0
	if drop {
		p.drop--
	}
	hang := p.hang
	p.hang = nil
	p.mu.Unlock()
	if hang != nil {
		close(p.hung)
		<-hang
	}
	if drop {
		return nil, fmt.Errorf("POST /charges: %w", io.ErrUnexpectedEOF)
	}
	return []byte("ch_" + ref), nil
}

func (p *payments) count(ref string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.charges[ref]
}

// chargeHandler charges the request's body as step "charge" with policy
// (reconciled by asking p), then answers 201 with the charge.
func chargeHandler(p *payments, policy step.Policy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ref := string(body)
		charge, err := step.Run(r.Context(), "charge", step.Options{
			Policy: policy,
			ReconcileFunc: func(context.Context) (step.Reconciliation, error) {
				if p.count(ref) > 0 {
					return step.Done([]byte("ch_" + ref)), nil
				}
				return step.NotDone(), nil
			},
		}, func(context.Context) ([]byte, error) { return p.charge(ref) })
		if err != nil {
			http.Error(w, "charge failed", http.StatusBadGateway) // never sent: the middleware answers
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charged %s", charge)
	})
}

// A charge whose answer was lost: the client gets 503
// TypeStepOutcomeUnknown with Retry-After, not the handler's 502 nor a
// stored response; its retry reconciles (charged: not again) and gets the
// 201, which later retries replay.
func TestStepUnknownAnswers503ThenReconciles(t *testing.T) {
	t.Parallel()
	p := newPayments()
	p.drop = 1
	var events []string
	m := newMiddleware(t, idempotency.Config{ObserveStepFunc: func(e step.Event) { events = append(events, e.Kind) }})
	h := m.Wrap(chargeHandler(p, step.Reconcile))
	w := post(h, http.MethodPost, "/charges", "k", "alice", "order-1")
	if typ := problemType(t, w, http.StatusServiceUnavailable); typ != idempotency.TypeStepOutcomeUnknown || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("lost answer: %s, Retry-After %q; want %s with Retry-After 2", typ, w.Header().Get("Retry-After"), idempotency.TypeStepOutcomeUnknown)
	}
	w = post(h, http.MethodPost, "/charges", "k", "alice", "order-1")
	if w.Code != http.StatusCreated || w.Body.String() != "charged ch_order-1" || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("retry: %d %q, want a fresh 201", w.Code, w.Body)
	}
	w = post(h, http.MethodPost, "/charges", "k", "alice", "order-1")
	if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("second retry: %d %q, want the 201 replayed", w.Code, w.Body)
	}
	if n := p.count("order-1"); n != 1 {
		t.Fatalf("charged %d times, want 1", n)
	}
	if m.Count(idempotency.OutcomeStepUnknown) != 1 || m.Count(idempotency.OutcomeExecuted) != 1 {
		t.Fatalf("outcomes: step_unknown %d, executed %d; want 1 and 1", m.Count(idempotency.OutcomeStepUnknown), m.Count(idempotency.OutcomeExecuted))
	}
	if fmt.Sprint(events) != "[unknown reconcile_found]" {
		t.Fatalf("step events %v", events)
	}
}

// A parked step answers 503 without Retry-After until a person resolves
// it; then the retry completes without charging again.
func TestStepParkedWaitsForAPerson(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPayments()
	p.drop = 1
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	h := newMiddleware(t, idempotency.Config{Store: store}).Wrap(chargeHandler(p, step.Park))
	for range 2 {
		w := post(h, http.MethodPost, "/charges", "k", "alice", "order-1")
		if typ := problemType(t, w, http.StatusServiceUnavailable); typ != idempotency.TypeStepOutcomeUnknown || w.Header().Get("Retry-After") != "" {
			t.Fatalf("parked: %s, Retry-After %q; want %s without Retry-After", typ, w.Header().Get("Retry-After"), idempotency.TypeStepOutcomeUnknown)
		}
	}
	u, err := store.Unknown(ctx, 0)
	if err != nil || len(u) != 1 || u[0].Key != idempotency.RecordKey("alice", "k") || u[0].Step != "charge" {
		t.Fatalf("Unknown = %+v, %v", u, err)
	}
	if err := store.Resolve(ctx, u[0].Key, "charge", true); err != nil {
		t.Fatal(err)
	}
	if w := post(h, http.MethodPost, "/charges", "k", "alice", "order-1"); w.Code != http.StatusCreated {
		t.Fatalf("after the decision: %d %q, want 201", w.Code, w.Body)
	}
	if n := p.count("order-1"); n != 1 {
		t.Fatalf("charged %d times, want 1", n)
	}
}

// The owner dies between the charge and its record ("started"): after its
// lease, the retry takes the key over and resumes from the recovery point
// (reconciled: not charged again), instead of running the request again.
func TestStepTakeoverResumes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemory(idempotency.MemoryConfig{})
		p := newPayments()
		release := make(chan struct{})
		p.hang, p.hung = release, make(chan struct{})
		var done atomic.Bool
		dead := newMiddleware(t, idempotency.Config{Store: noExtend{store}, Lease: 10 * time.Second}).
			Wrap(chargeHandler(p, step.Reconcile))
		go func() { post(dead, http.MethodPost, "/charges", "k", "alice", "order-1"); done.Store(true) }()
		<-p.hung // charged, its answer not yet back: the owner "dies" here
		h := newMiddleware(t, idempotency.Config{Store: store, Lease: 10 * time.Second}).Wrap(chargeHandler(p, step.Reconcile))
		if w := post(h, http.MethodPost, "/charges", "k", "alice", "order-1"); w.Code != http.StatusConflict {
			t.Fatalf("during the dead owner's lease: %d, want 409", w.Code)
		}
		time.Sleep(10*time.Second + time.Millisecond)
		w := post(h, http.MethodPost, "/charges", "k", "alice", "order-1")
		if w.Code != http.StatusCreated || w.Body.String() != "charged ch_order-1" {
			t.Fatalf("after the lease: %d %q, want 201 from the reconciled charge", w.Code, w.Body)
		}
		if n := p.count("order-1"); n != 1 {
			t.Fatalf("charged %d times, want 1", n)
		}
		close(release) // the dead owner's goroutine ends; its writes are fenced off
		synctest.Wait()
		if !done.Load() {
			t.Fatal("the dead owner's request did not end")
		}
		if w := post(h, http.MethodPost, "/charges", "k", "alice", "order-1"); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("a later retry: %d %q, want the 201 replayed", w.Code, w.Body)
		}
	})
}

// noExtend is a store whose extensions fail: its owner's lease runs out
// as a dead owner's does. It records steps (the Memory's SaveSteps).
type noExtend struct{ *idempotency.Memory }

func (noExtend) Extend(context.Context, string, string, time.Duration) error {
	return fmt.Errorf("store unreachable")
}
