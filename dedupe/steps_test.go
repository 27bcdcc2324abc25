package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/step"
)

// bank is a downstream that charges a ref every time it is asked (it does
// not dedupe), can drop its answer after charging, and can be asked
// whether a ref was charged.
type bank struct {
	mu      sync.Mutex
	charges map[string]int
	drop    int // answers to drop, after charging
}

func newBank() *bank { return &bank{charges: map[string]int{}} }

func (b *bank) charge(ref string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.charges[ref]++
	if b.drop > 0 {
		b.drop--
		return nil, fmt.Errorf("POST /charges: %w", io.ErrUnexpectedEOF)
	}
	return []byte("charge-of-" + ref), nil
}

func (b *bank) find(ref string) step.Reconciliation {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.charges[ref] > 0 {
		return step.Done([]byte("charge-of-" + ref))
	}
	return step.NotDone()
}

func (b *bank) count(ref string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.charges[ref]
}

// stepHandler charges the message's key at b as step "charge" with policy,
// then applies it (counted in applied) unless failApply says otherwise.
func stepHandler(b *bank, policy step.Policy, applied map[string]int, failApply *error) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		ref := msg.Key()
		res, err := step.Run(ctx, "charge", step.Options{
			Policy:        policy,
			ReconcileFunc: func(context.Context) (step.Reconciliation, error) { return b.find(ref), nil },
		}, func(context.Context) ([]byte, error) { return b.charge(ref) })
		if err != nil {
			return err
		}
		if len(res) > 0 && string(res) != "charge-of-"+ref { // a person's "applied" has no result
			return fmt.Errorf("charge result %q", res)
		}
		if failApply != nil && *failApply != nil {
			return *failApply
		}
		applied[ref]++
		return nil
	})
}

// A handler that fails after its first step gives the key back with the
// step kept: the retry resumes after it, and the charge happens once.
func TestStepResumesAfterFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, applied := newBank(), map[string]int{}
	failApply := errors.New("database down")
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "steps"})
	p := consumertest.New(consumer.Config{
		Handler:    stepHandler(b, step.Park, applied, &failApply),
		Middleware: []consumer.Middleware{wrap(t, store, dedupe.Config{})},
	})
	msg := func() *consumer.Message { m := message("m1", "order-1", "body"); return m }
	if res := p.Process(ctx, msg()); res.Outcome != consumer.OutcomeRetry {
		t.Fatalf("first attempt: %s %v, want a retry", res.Outcome, res.Err)
	}
	failApply = nil
	if res := p.Process(ctx, msg()); res.Outcome != consumer.OutcomeAck {
		t.Fatalf("retry: %s %v, want ack", res.Outcome, res.Err)
	}
	if res := p.Process(ctx, msg()); res.Outcome != consumer.OutcomeDuplicate {
		t.Fatalf("redelivery: %s %v, want duplicate", res.Outcome, res.Err)
	}
	if b.count("order-1") != 1 || applied["order-1"] != 1 {
		t.Fatalf("charged %d times, applied %d times; want once each", b.count("order-1"), applied["order-1"])
	}
}

// The owner died between "started" and "done": the next owner, after the
// lease, finds the step started and, per its policy, reconciles (charged:
// not again), reruns it, or parks the message.
func TestStepTakeoverAfterCrash(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy      step.Policy
		charged     bool // the dead owner's call reached the bank
		wantOutcome consumer.Outcome
		wantCharges int
	}{
		{step.Reconcile, true, consumer.OutcomeAck, 1},
		{step.Reconcile, false, consumer.OutcomeAck, 1},
		{step.Rerun, true, consumer.OutcomeAck, 2},
		{step.Park, true, consumer.OutcomeDeadLetter, 1},
	} {
		t.Run(fmt.Sprintf("%s/charged=%v", c.policy, c.charged), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := dedupetest.NewClock(time.Now())
			store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "crash", NowFunc: clock.Now})
			b, applied := newBank(), map[string]int{}
			// The dead owner: claimed, recorded the step started, called
			// the bank (or not), and died.
			claim, err := store.Claim(ctx, "order-1", dedupe.Fingerprint("body"), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.SaveSteps(ctx, "order-1", claim.Token, map[string]step.Record{"charge": {Status: step.StatusStarted}}); err != nil {
				t.Fatal(err)
			}
			if c.charged {
				_, _ = b.charge("order-1")
			}
			p := consumertest.New(consumer.Config{
				Handler:    stepHandler(b, c.policy, applied, nil),
				Middleware: []consumer.Middleware{wrap(t, store, dedupe.Config{NowFunc: clock.Now})},
			})
			if res := p.Process(ctx, received("m1", "order-1", "body", 2)); res.Outcome != consumer.OutcomeRetry {
				t.Fatalf("during the dead owner's lease: %s %v, want a retry", res.Outcome, res.Err)
			}
			clock.Advance(time.Minute + time.Second)
			res := p.Process(ctx, received("m1", "order-1", "body", 3))
			if res.Outcome != c.wantOutcome {
				t.Fatalf("after the lease: %s %v, want %s", res.Outcome, res.Err, c.wantOutcome)
			}
			if got := b.count("order-1"); got != c.wantCharges {
				t.Errorf("charged %d times, want %d", got, c.wantCharges)
			}
			if c.policy == step.Park {
				if res.Class != consumer.ClassOutcomeUnknown || res.Failure == nil || res.Failure.Step != "charge" {
					t.Fatalf("parked: class %q, failure %+v; want outcome_unknown naming step charge", res.Class, res.Failure)
				}
				if applied["order-1"] != 0 {
					t.Fatalf("a parked message was applied")
				}
				u, err := store.Unknown(ctx, 0)
				if err != nil || len(u) != 1 || u[0].Key != "order-1" || u[0].Step != "charge" || u[0].Held {
					t.Fatalf("Unknown = %+v, %v; want order-1's charge, not held", u, err)
				}
				return
			}
			if applied["order-1"] != 1 {
				t.Fatalf("applied %d times, want 1", applied["order-1"])
			}
		})
	}
}

// A parked step is resolved by a person; the redriven message then
// completes: applied → the step is skipped, not applied → it runs.
func TestStepParkedResolvedRedriven(t *testing.T) {
	t.Parallel()
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprint("applied=", applied), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "park"})
			b, done := newBank(), map[string]int{}
			b.drop = 1
			p := consumertest.New(consumer.Config{
				Handler:    stepHandler(b, step.Park, done, nil),
				Middleware: []consumer.Middleware{wrap(t, store, dedupe.Config{})},
			})
			res := p.Process(ctx, message("m1", "order-1", "body"))
			if res.Outcome != consumer.OutcomeDeadLetter || res.Class != consumer.ClassOutcomeUnknown || res.Failure.Step != "charge" {
				t.Fatalf("dropped answer: %s %q %v, want dead_letter outcome_unknown", res.Outcome, res.Class, res.Err)
			}
			// A redrive before anyone decided parks it again.
			if res := p.Process(ctx, message("m2", "order-1", "body")); res.Class != consumer.ClassOutcomeUnknown {
				t.Fatalf("unresolved redrive: %s %q, want parked again", res.Outcome, res.Class)
			}
			if err := store.Resolve(ctx, "order-1", "charge", applied); err != nil {
				t.Fatal(err)
			}
			if res := p.Process(ctx, message("m3", "order-1", "body")); res.Outcome != consumer.OutcomeAck {
				t.Fatalf("redrive after the decision: %s %v, want ack", res.Outcome, res.Err)
			}
			wantCharges := map[bool]int{true: 1, false: 2}[applied]
			if b.count("order-1") != wantCharges || done["order-1"] != 1 {
				t.Fatalf("charged %d times (want %d), applied %d times (want 1)", b.count("order-1"), wantCharges, done["order-1"])
			}
		})
	}
}

// stepEvents records the step events an Observer gets.
type stepEvents struct {
	consumer.NopObserver
	mu     sync.Mutex
	events []string
}

func (o *stepEvents) StepEvent(msg *consumer.Message, e step.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, msg.ID+":"+e.Step+":"+e.Kind)
}

// A handler that swallows a step's unknown outcome does not ack its
// message; the observer and the metric see the unknown and the reconcile.
func TestStepUnknownSwallowedStillFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()
	obs := &stepEvents{}
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "swallow"})
	b := newBank()
	b.drop = 1
	h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		_, _ = step.Run(ctx, "charge", step.Options{
			ReconcileFunc: func(context.Context) (step.Reconciliation, error) { return b.find(msg.Key()), nil },
		}, func(context.Context) ([]byte, error) { return b.charge(msg.Key()) })
		return nil // the error ignored
	})
	p := consumertest.New(consumer.Config{Handler: h, Middleware: []consumer.Middleware{
		wrap(t, store, dedupe.Config{Observer: obs, MeterProvider: mp})}})
	res := p.Process(ctx, message("m1", "order-1", "body"))
	if res.Outcome != consumer.OutcomeRetry {
		t.Fatalf("outcome %s %v, want a retry (the charge's outcome is unknown)", res.Outcome, res.Err)
	}
	if _, ok := errors.AsType[*step.UnknownError](res.Err); !ok {
		t.Fatalf("err %v, want the step's UnknownError", res.Err)
	}
	if res := p.Process(ctx, message("m2", "order-1", "body")); res.Outcome != consumer.OutcomeAck {
		t.Fatalf("retry: %s %v, want ack after the reconcile found the charge", res.Outcome, res.Err)
	}
	if b.count("order-1") != 1 {
		t.Fatalf("charged %d times", b.count("order-1"))
	}
	if fmt.Sprint(obs.events) != "[m1:charge:unknown m2:charge:reconcile_found]" {
		t.Fatalf("observer events %v", obs.events)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sqsonce.dedupe.steps" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value("event")
				got[v.AsString()] += dp.Value
			}
		}
	}
	if got[step.EventUnknown] != 1 || got[step.EventReconcileFound] != 1 || len(got) != 2 {
		t.Fatalf("sqsonce.dedupe.steps = %v, want unknown 1, reconcile_found 1", got)
	}
}
