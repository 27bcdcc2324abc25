package step_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/step"
)

// recorder is an in-memory step.Recorder that counts events and can fail
// its saves.
type recorder struct {
	mu      sync.Mutex
	steps   map[string]step.Record
	saves   []step.Status
	events  []string
	failAll bool
}

func newRecorder() *recorder { return &recorder{steps: map[string]step.Record{}} }

func (r *recorder) Load(name string) (step.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.steps[name]
	return rec, ok
}

func (r *recorder) Save(ctx context.Context, name string, rec step.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failAll {
		return errors.New("store down")
	}
	r.steps[name] = rec
	r.saves = append(r.saves, rec.Status)
	return nil
}

func (r *recorder) StepEvent(e step.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e.Kind)
}

func (r *recorder) status(name string) step.Status {
	rec, _ := r.Load(name)
	return rec.Status
}

func TestRunRecordsDoneAndSkipsIt(t *testing.T) {
	rec := newRecorder()
	ctx := step.WithRecorder(context.Background(), rec)
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return []byte("charge-1"), nil }
	for range 3 {
		got, err := step.Run(ctx, "charge", step.Options{Policy: step.Park}, fn)
		if err != nil || string(got) != "charge-1" {
			t.Fatalf("Run = %q, %v", got, err)
		}
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times, want 1", runs)
	}
	if fmt.Sprint(rec.saves) != "[started done]" {
		t.Fatalf("saves %v, want [started done]", rec.saves)
	}
}

func TestRunWithoutRecorderRunsNothing(t *testing.T) {
	_, err := step.Run(context.Background(), "charge", step.Options{}, func(context.Context) ([]byte, error) {
		t.Fatal("fn ran without a recorder")
		return nil, nil
	})
	if !errors.Is(err, step.ErrNoRecorder) {
		t.Fatalf("err = %v, want ErrNoRecorder", err)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	ctx := step.WithRecorder(context.Background(), newRecorder())
	fn := func(context.Context) ([]byte, error) { t.Fatal("fn ran"); return nil, nil }
	for _, c := range []struct {
		name string
		opts step.Options
	}{
		{"", step.Options{}},
		{"has space", step.Options{}},
		{strings.Repeat("x", step.MaxNameBytes+1), step.Options{}},
		{"ok", step.Options{Policy: step.Reconcile}},
		{"ok", step.Options{Policy: 9}},
	} {
		if _, err := step.Run(ctx, c.name, c.opts, fn); err == nil {
			t.Errorf("Run(%q, %+v) succeeded", c.name, c.opts)
		}
	}
}

// A known failure records not_done and is returned as fn returned it; the
// next attempt runs the step again without asking.
func TestRunKnownFailureRunsAgain(t *testing.T) {
	rec := newRecorder()
	ctx := step.WithRecorder(context.Background(), rec)
	refused := errors.New("card declined")
	_, err := step.Run(ctx, "charge", step.Options{Policy: step.Park}, func(context.Context) ([]byte, error) { return nil, refused })
	if !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the function's error", err)
	}
	if _, ok := errors.AsType[*step.UnknownError](err); ok {
		t.Fatalf("a known failure is an UnknownError: %v", err)
	}
	if rec.status("charge") != step.StatusNotDone {
		t.Fatalf("status %s, want not_done", rec.status("charge"))
	}
	got, err := step.Run(ctx, "charge", step.Options{Policy: step.Park}, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(got) != "ok" {
		t.Fatalf("second Run = %q, %v", got, err)
	}
}

func TestIsUnknown(t *testing.T) {
	timeout := &net.OpError{Op: "read", Err: &timeoutErr{}}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("400 bad request"), false},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("post: %w", context.Canceled), true},
		{timeout, true},
		{fmt.Errorf("post: %w", io.EOF), true},
		{io.ErrUnexpectedEOF, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{syscall.EPIPE, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		{step.Unknown(errors.New("502 after the request was sent")), true},
		{step.NotApplied(fmt.Errorf("dial: %w", context.DeadlineExceeded)), false},
		{step.Unknown(step.NotApplied(io.EOF)), true}, // the outermost mark wins
	} {
		if got := step.IsUnknown(c.err); got != c.want {
			t.Errorf("IsUnknown(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if step.Unknown(nil) != nil || step.NotApplied(nil) != nil {
		t.Error("marking nil made an error")
	}
}

type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

// An unknown outcome under each policy: the attempt fails with an
// UnknownError, and the next attempt reconciles, reruns or parks.
func TestUnknownThenPolicy(t *testing.T) {
	lost := fmt.Errorf("post /charges: %w", io.ErrUnexpectedEOF)
	for _, c := range []struct {
		name      string
		policy    step.Policy
		answer    step.Reconciliation
		wantRuns  int
		wantErr   bool
		wantClass string
		wantState step.Status
		wantEvent string
	}{
		{"reconcile found", step.Reconcile, step.Done([]byte("found")), 1, false, "", step.StatusDone, step.EventReconcileFound},
		{"reconcile not found", step.Reconcile, step.NotDone(), 2, false, "", step.StatusDone, step.EventReconcileNotFound},
		{"reconcile still unknown", step.Reconcile, step.StillUnknown("bank busy"), 1, true, "", step.StatusUnknown, step.EventReconcileStillUnknown},
		{"rerun", step.Rerun, step.Reconciliation{}, 2, false, "", step.StatusDone, step.EventRerun},
		{"park", step.Park, step.Reconciliation{}, 1, true, step.ClassOutcomeUnknown, step.StatusUnknown, step.EventParked},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder()
			ctx := step.WithRecorder(context.Background(), rec)
			runs, reconciles := 0, 0
			opts := step.Options{Policy: c.policy, ReconcileFunc: func(context.Context) (step.Reconciliation, error) {
				reconciles++
				return c.answer, nil
			}}
			fn := func(context.Context) ([]byte, error) {
				runs++
				if runs == 1 {
					return nil, lost
				}
				return []byte("ran"), nil
			}
			_, err := step.Run(ctx, "charge", opts, fn)
			u, ok := errors.AsType[*step.UnknownError](err)
			if !ok || u.Step != "charge" || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("first attempt: err %v, want an UnknownError of step charge wrapping the cause", err)
			}
			if rec.status("charge") != step.StatusUnknown {
				t.Fatalf("after the first attempt: status %s, want unknown", rec.status("charge"))
			}
			got, err := step.Run(ctx, "charge", opts, fn)
			if (err != nil) != c.wantErr {
				t.Fatalf("second attempt: %q, %v", got, err)
			}
			if runs != c.wantRuns {
				t.Errorf("fn ran %d times, want %d", runs, c.wantRuns)
			}
			if c.policy == step.Reconcile && reconciles != 1 {
				t.Errorf("reconciled %d times, want 1", reconciles)
			}
			if c.policy != step.Reconcile && reconciles != 0 {
				t.Errorf("policy %s reconciled", c.policy)
			}
			var fc interface{ FailureClass() string }
			class := ""
			if errors.As(err, &fc) {
				class = fc.FailureClass()
			}
			if class != c.wantClass {
				t.Errorf("FailureClass %q, want %q", class, c.wantClass)
			}
			if rec.status("charge") != c.wantState {
				t.Errorf("status %s, want %s", rec.status("charge"), c.wantState)
			}
			if !strings.Contains(fmt.Sprint(rec.events), c.wantEvent) {
				t.Errorf("events %v, want one %s", rec.events, c.wantEvent)
			}
			if c.name == "reconcile found" && string(got) != "found" {
				t.Errorf("result %q, want the reconciled %q", got, "found")
			}
		})
	}
}

// A step found started (its owner died between started and done) is an
// unknown outcome: counted, and decided by the policy.
func TestStartedIsUnknown(t *testing.T) {
	rec := newRecorder()
	rec.steps["charge"] = step.Record{Status: step.StatusStarted}
	ctx := step.WithRecorder(context.Background(), rec)
	_, err := step.Run(ctx, "charge", step.Options{}, func(context.Context) ([]byte, error) {
		t.Fatal("a parked step ran")
		return nil, nil
	})
	u, ok := errors.AsType[*step.UnknownError](err)
	if !ok || u.Policy != step.Park || u.FailureClass() != deadletter.ClassOutcomeUnknown || u.FailureStep() != "charge" {
		t.Fatalf("err %v, want a parked UnknownError", err)
	}
	if rec.status("charge") != step.StatusUnknown {
		t.Fatalf("status %s, want unknown (listed for a person)", rec.status("charge"))
	}
	if fmt.Sprint(rec.events) != "[unknown parked]" {
		t.Fatalf("events %v", rec.events)
	}
}

// The step's own timeout leaves the outcome unknown, even when the
// function returns an error that does not say so.
func TestTimeoutIsUnknown(t *testing.T) {
	rec := newRecorder()
	ctx := step.WithRecorder(context.Background(), rec)
	_, err := step.Run(ctx, "charge", step.Options{Policy: step.Rerun, Timeout: time.Millisecond}, func(ctx context.Context) ([]byte, error) {
		<-ctx.Done()
		return nil, errors.New("gave up")
	})
	if _, ok := errors.AsType[*step.UnknownError](err); !ok {
		t.Fatalf("err %v, want UnknownError", err)
	}
}

// A result that cannot be recorded: the step's outcome is unknown.
func TestResultTooLarge(t *testing.T) {
	rec := newRecorder()
	ctx := step.WithRecorder(context.Background(), rec)
	_, err := step.Run(ctx, "charge", step.Options{Policy: step.Rerun}, func(context.Context) ([]byte, error) {
		return make([]byte, step.MaxResultBytes+1), nil
	})
	if _, ok := errors.AsType[*step.UnknownError](err); !ok || !strings.Contains(err.Error(), "MaxResultBytes") {
		t.Fatalf("err %v, want UnknownError naming MaxResultBytes", err)
	}
}

// A store that fails: nothing runs when "started" cannot be recorded.
func TestStartNotRecordedRunsNothing(t *testing.T) {
	rec := newRecorder()
	rec.failAll = true
	ctx := step.WithRecorder(context.Background(), rec)
	_, err := step.Run(ctx, "charge", step.Options{Policy: step.Rerun}, func(context.Context) ([]byte, error) {
		t.Fatal("fn ran though its start was not recorded")
		return nil, nil
	})
	if err == nil || !strings.Contains(err.Error(), "store down") {
		t.Fatalf("err %v, want the store's", err)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []step.Policy{step.Reconcile, step.Rerun, step.Park} {
		got, err := step.ParsePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p, got, err)
		}
	}
	if _, err := step.ParsePolicy("retry"); err == nil {
		t.Error("ParsePolicy(retry) succeeded")
	}
	if step.ClassOutcomeUnknown != deadletter.ClassOutcomeUnknown {
		t.Errorf("step.ClassOutcomeUnknown %q != deadletter's %q", step.ClassOutcomeUnknown, deadletter.ClassOutcomeUnknown)
	}
}
