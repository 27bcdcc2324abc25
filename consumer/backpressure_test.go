package consumer_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// downstream is what the back-pressure tests' handlers call: down until
// a time, then up. While down it fails every call, with Unavailable (and
// a Retry-After of retryAfter, 0 for none) or, when plain, with a plain
// error (a transient failure, for the breaker).
type downstream struct {
	until      time.Time
	retryAfter time.Duration
	plain      bool

	mu       sync.Mutex
	downRuns int            // calls while down
	ok       map[string]int // body → successful calls
	attempts map[string]int // body → Message.Attempt of its successful call
	order    map[string][]string
}

func (d *downstream) handle(_ context.Context, m *consumer.Message) error {
	time.Sleep(callTime)
	d.mu.Lock()
	defer d.mu.Unlock()
	if time.Now().Before(d.until) {
		d.downRuns++
		if d.plain {
			return errors.New("downstream: 500 internal error")
		}
		return consumer.Unavailable(errors.New("downstream: 503 service unavailable"), d.retryAfter)
	}
	if d.ok == nil {
		d.ok, d.attempts, d.order = map[string]int{}, map[string]int{}, map[string][]string{}
	}
	d.ok[m.Body]++
	d.attempts[m.Body] = m.Attempt()
	d.order[m.GroupID] = append(d.order[m.GroupID], m.Body)
	return nil
}

// callTime is how long each call to the downstream takes: the first
// receive comes strictly before the first pause.
const callTime = 100 * time.Millisecond

// pauseWatch records the consumer's pauses and the receive calls it makes.
type pauseWatch struct {
	consumer.NopObserver
	mu       sync.Mutex
	pauses   []consumer.Pause
	pausedAt []time.Time
	resumed  []time.Time
	receives []time.Time // when each ReceiveMessage call started
	asked    []int32     // its MaxNumberOfMessages
}

func (w *pauseWatch) Paused(p consumer.Pause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pauses = append(w.pauses, p)
	w.pausedAt = append(w.pausedAt, time.Now())
}

func (w *pauseWatch) Resumed(time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resumed = append(w.resumed, time.Now())
}

// watchReceives records every ReceiveMessage call of f.
func (w *pauseWatch) watchReceives(f *sqsfake.Fake) {
	f.Inject(func(op string, in any) sqsfake.Fault {
		if op == "ReceiveMessage" {
			w.mu.Lock()
			w.receives = append(w.receives, time.Now())
			w.asked = append(w.asked, in.(*sqs.ReceiveMessageInput).MaxNumberOfMessages)
			w.mu.Unlock()
		}
		return sqsfake.Fault{}
	})
}

// whilePaused returns the receive calls started from the first pause to
// the resume, with what they asked for.
func (w *pauseWatch) whilePaused() (n int, asked []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pausedAt) == 0 {
		return 0, nil
	}
	end := time.Now()
	if len(w.resumed) > 0 {
		end = w.resumed[len(w.resumed)-1]
	}
	for i, at := range w.receives {
		if !at.Before(w.pausedAt[0]) && at.Before(end) {
			n++
			asked = append(asked, w.asked[i])
		}
	}
	return n, asked
}

// redrive3 is a RedrivePolicy that moves a message to the DLQ after 3
// receives.
func redrive3(fifo bool) string {
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	return `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq` + suffix + `","maxReceiveCount":"3"}`
}

// TestDownstreamOutagePausesReceiving: the downstream is down for ten
// minutes from the start, and the queue's maxReceiveCount is 3. The
// handlers' first calls find it down and say Unavailable; the consumer
// pauses: no receive call while paused but one probe's (asking for one
// message) when it holds nothing to probe with; the messages it holds are
// extended, not released; a failed probe is held for the next; after the
// outage a probe succeeds and every message is handled once, none
// dead-lettered (MaxAttempts 2 does not count the Unavailable receives).
func TestDownstreamOutagePausesReceiving(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fifo       bool
		retryAfter time.Duration
		prefetch   int
		// one: Concurrency 1 (else 4); with NoPrefetch nothing is held
		// once the first message failed, so the first probe is received.
		one bool
		// concurrency: else 4 (1 with one).
		concurrency int
		// dedupe: behind the dedupe middleware, which claims the key on
		// each run (a held probe's too) and releases it on the failure.
		dedupe bool
	}{
		{name: "dedupe", retryAfter: time.Minute, dedupe: true, one: true, prefetch: consumer.NoPrefetch},
		// The running messages' failures free their slots: receives would
		// fill them again, but for the pause.
		{name: "slots freed", concurrency: 8, prefetch: consumer.NoPrefetch, retryAfter: time.Minute},
		{name: "retry-after", retryAfter: time.Minute},
		{name: "no retry-after"},
		{name: "nothing held", prefetch: consumer.NoPrefetch, one: true},
		{name: "fifo", fifo: true, retryAfter: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, dlq := onFake(tc.fifo, map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": redrive3(tc.fifo)}, nil)
				const n = 40
				for i := range n {
					f.Put(q, fmt.Sprintf("m%02d", i), fmt.Sprintf("g%d", i%5))
				}
				start := time.Now()
				const outage = 10 * time.Minute
				d := &downstream{until: start.Add(outage), retryAfter: tc.retryAfter}
				w := &pauseWatch{}
				w.watchReceives(f)
				core, logs := observer.New(zapcore.InfoLevel)
				concurrency := cmp.Or(tc.concurrency, 4)
				if tc.one {
					concurrency = 1
				}
				var mw []consumer.Middleware
				if tc.dedupe {
					dd, err := dedupe.New(dedupe.Config{Store: dedupe.NewMemory(dedupe.MemoryConfig{})})
					if err != nil {
						t.Fatal(err)
					}
					mw = append(mw, dd.Wrap)
				}
				stop := startOnFake(t, f, q, consumer.Config{
					Concurrency: concurrency, Prefetch: tc.prefetch, MaxAttempts: 2, Middleware: mw,
					Handler: consumer.HandlerFunc(d.handle), Observer: w, Logger: zap.New(core),
				})
				if !waitUntil(30*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
					t.Errorf("not drained 30 minutes on: %d messages left", len(f.Messages(q)))
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}

				d.mu.Lock()
				defer d.mu.Unlock()
				for i := range n {
					b := fmt.Sprintf("m%02d", i)
					if d.ok[b] != 1 || d.attempts[b] != 1 {
						t.Errorf("%s: handled %d times, attempt %d at its success; want once, attempt 1", b, d.ok[b], d.attempts[b])
					}
				}
				if tc.fifo {
					for g, bodies := range d.order {
						if !slices.IsSorted(bodies) {
							t.Errorf("group %s ran out of order: %v", g, bodies)
						}
					}
				}
				if sent := f.Sent(dlq); len(sent) != 0 {
					t.Errorf("%d dead letters, want none: %+v", len(sent), sent)
				}

				w.mu.Lock()
				pauses, resumed, firstPause := len(w.pauses), w.resumed, w.pausedAt
				w.mu.Unlock()
				if pauses == 0 || len(resumed) != 1 || resumed[0].Before(d.until) {
					t.Fatalf("%d pauses, resumed at %v; want pauses, and one resume after the outage (%v)", pauses, resumed, d.until)
				}
				during, asked := w.whilePaused()
				t.Logf("%d pauses; %d receive calls while paused (asking for %v); %d calls to the downstream while it was down", pauses, during, asked, d.downRuns)
				if during > pauses {
					t.Errorf("%d receive calls while paused, more than one a pause (%d pauses)", during, pauses)
				}
				for _, a := range asked {
					if a != 1 {
						t.Errorf("a receive while paused asked for %d messages; a probe's asks for 1", a)
					}
				}
				if tc.one && during != 1 {
					t.Errorf("%d receive calls while paused; want the first probe's, and none for the next probes (the failed probe is held)", during)
				}
				// The first wave (up to Concurrency handlers), then one call a
				// probe.
				if d.downRuns > concurrency+pauses {
					t.Errorf("%d calls to the downstream while down; want at most the %d running when it went down and one a pause (%d)", d.downRuns, concurrency, pauses)
				}
				// Held messages were kept invisible (extended) and never
				// released: no visibility change to 0.
				extended := 0
				for _, c := range f.VisibilityLog() {
					if c.Seconds == 0 {
						t.Errorf("a visibility change to 0 (a release) at %v", c.At.Sub(start))
					}
					if c.At.After(firstPause[0]) && c.At.Before(resumed[0]) && c.Seconds == 30 {
						extended++
					}
				}
				if tc.prefetch != consumer.NoPrefetch && extended == 0 {
					t.Error("no heartbeat extension during the pause; want the held messages extended")
				}
				if logs.FilterMessageSnippet("consumer: paused").Len() == 0 || logs.FilterMessage("consumer: resumed: the probe succeeded").Len() != 1 {
					t.Errorf("logs: %d paused lines, %d resumed; want some, and one", logs.FilterMessageSnippet("consumer: paused").Len(), logs.FilterMessage("consumer: resumed: the probe succeeded").Len())
				}
				checkProblems(t, f)
			})
		})
	}
}

// TestBreakerPausesOnTransientFailures: the handlers do not say
// Unavailable; the downstream fails with plain errors for ten minutes.
// The breaker (5 failures within 30 s, half of what finished) pauses the
// consumer; it probes and resumes after the outage. With the breaker off,
// the consumer keeps receiving.
func TestBreakerPausesOnTransientFailures(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run("breaker off="+strconv.FormatBool(off), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
				const n = 40
				for i := range n {
					f.Put(q, fmt.Sprintf("m%02d", i), "")
				}
				const outage = 10 * time.Minute
				d := &downstream{until: time.Now().Add(outage), plain: true}
				w := &pauseWatch{}
				w.watchReceives(f)
				stop := startOnFake(t, f, q, consumer.Config{
					Concurrency: 4, Handler: consumer.HandlerFunc(d.handle), Observer: w,
					BackPressure: consumer.BackPressure{BreakerOff: off, BreakerFailures: 5},
				})
				if !waitUntil(40*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
					t.Errorf("not drained 40 minutes on: %d messages left", len(f.Messages(q)))
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				d.mu.Lock()
				for i := range n {
					if b := fmt.Sprintf("m%02d", i); d.ok[b] != 1 {
						t.Errorf("%s: handled %d times, want once", b, d.ok[b])
					}
				}
				downRuns := d.downRuns
				d.mu.Unlock()
				if sent := f.Sent(dlq); len(sent) != 0 {
					t.Errorf("%d dead letters, want none", len(sent))
				}
				w.mu.Lock()
				pauses, resumed := w.pauses, w.resumed
				received := len(w.receives)
				w.mu.Unlock()
				t.Logf("%d pauses, %d resumes, %d receive calls, %d calls to the downstream while down", len(pauses), len(resumed), received, downRuns)
				if off {
					if len(pauses) != 0 {
						t.Errorf("breaker off: %d pauses, want none", len(pauses))
					}
					return
				}
				if len(pauses) == 0 || pauses[0].Reason != consumer.PauseBreaker || len(resumed) != 1 {
					t.Fatalf("pauses %+v, %d resumes; want pauses by the breaker and one resume", pauses, len(resumed))
				}
				if during, _ := w.whilePaused(); during > len(pauses) {
					t.Errorf("%d receive calls while paused, more than one a pause (%d)", during, len(pauses))
				}
			})
		})
	}
}

// TestBackPressureOff: with BackPressure.Off an Unavailable is a retry
// after its Retry-After and nothing pauses; MaxAttempts 1 does not
// dead-letter it.
func TestBackPressureOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		for i := range 10 {
			f.Put(q, fmt.Sprintf("m%02d", i), "")
		}
		d := &downstream{until: time.Now().Add(3 * time.Minute), retryAfter: 20 * time.Second}
		w := &pauseWatch{}
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 4, MaxAttempts: 1, Handler: consumer.HandlerFunc(d.handle), Observer: w,
			BackPressure: consumer.BackPressure{Off: true},
		})
		if !waitUntil(10*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Errorf("not drained: %d messages left", len(f.Messages(q)))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if len(w.pauses) != 0 {
			t.Errorf("%d pauses with back-pressure off", len(w.pauses))
		}
		if sent := f.Sent(dlq); len(sent) != 0 {
			t.Errorf("%d dead letters, want none", len(sent))
		}
		// Each retry waited its Retry-After: a visibility of 20 s.
		retries := 0
		for _, c := range f.VisibilityLog() {
			if c.Seconds == 20 {
				retries++
			}
		}
		if d.downRuns == 0 || retries != d.downRuns {
			t.Errorf("%d calls while down, %d visibility changes to the Retry-After (20 s); want as many", d.downRuns, retries)
		}
	})
}

// TestUnavailableClassification: Unavailable is a retry of class
// unavailable after its Retry-After (the pause when it gave none), on any
// attempt, its text in the settled line without the prefix; a Classifier
// may say the same.
func TestUnavailableClassification(t *testing.T) {
	down := errors.New("bank: 503")
	type httpErr struct{ error }
	for _, tc := range []struct {
		name       string
		err        error
		classifier consumer.Classifier
		want       time.Duration
	}{
		{name: "retry-after", err: consumer.Unavailable(down, 42*time.Second), want: 42 * time.Second},
		{name: "none", err: consumer.Unavailable(down, 0), want: consumer.DefaultPause},
		{name: "wrapped", err: fmt.Errorf("charge c1: %w", consumer.Unavailable(down, time.Second)), want: time.Second},
		{name: "classifier", err: httpErr{down}, want: consumer.DefaultPause, classifier: consumer.ClassifierFunc(func(_ context.Context, _ *consumer.Message, err error) (consumer.Verdict, bool) {
			if _, ok := errors.AsType[httpErr](err); ok {
				return consumer.Verdict{Outcome: consumer.OutcomeRetry, Class: consumer.ClassUnavailable}, true
			}
			return consumer.Verdict{}, false
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := consumertest.New(consumer.Config{
				MaxAttempts: 1, Classifier: tc.classifier,
				Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return tc.err }),
			})
			res := h.Process(context.Background(), consumertest.NewMessage("m1", consumertest.WithReceiveCount(7)))
			if res.Outcome != consumer.OutcomeRetry || res.Class != consumer.ClassUnavailable || res.Delay != tc.want {
				t.Errorf("result %v class %q delay %s; want retry, %q, %s", res.Outcome, res.Class, res.Delay, consumer.ClassUnavailable, tc.want)
			}
			if tc.classifier == nil && !strings.Contains(tc.err.Error(), "unavailable") {
				t.Errorf("error text %q does not say unavailable", tc.err)
			}
		})
	}
}

// TestBackPressureTelemetry: the pauses are counted by reason, the paused
// gauge is back at 0 after the resume, the time paused is recorded, and
// every process span ends, a held probe's included (outcome "held").
func TestBackPressureTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		ctx := context.Background()
		defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()

		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		for i := range 5 {
			f.Put(q, fmt.Sprintf("m%02d", i), "")
		}
		d := &downstream{until: time.Now().Add(5 * time.Minute), retryAfter: time.Minute}
		w := &pauseWatch{}
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 1, Handler: consumer.HandlerFunc(d.handle), Observer: w,
			TracerProvider: tp, MeterProvider: mp,
		})
		if !waitUntil(20*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Errorf("not drained: %d messages left", len(f.Messages(q)))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		held := 0
		for _, s := range spans.Ended() {
			for _, a := range s.Attributes() {
				if a.Key == "sqsonce.outcome" && a.Value.AsString() == "held" {
					held++
				}
			}
		}
		if started, ended := len(spans.Started()), len(spans.Ended()); started != ended || held == 0 {
			t.Errorf("%d spans started, %d ended, %d of a held probe; want every span ended, some of held probes", started, ended, held)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		var pauses, gauge int64
		var pausedTime float64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch data := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, dp := range data.DataPoints {
						switch m.Name {
						case "sqsonce.consumer.pauses":
							if r, _ := dp.Attributes.Value("sqsonce.pause.reason"); r.AsString() == consumer.PauseUnavailable {
								pauses += dp.Value
							}
						case "sqsonce.consumer.paused":
							gauge += dp.Value
						}
					}
				case metricdata.Sum[float64]:
					if m.Name == "sqsonce.consumer.paused.time" {
						for _, dp := range data.DataPoints {
							pausedTime += dp.Value
						}
					}
				}
			}
		}
		w.mu.Lock()
		wantPauses := len(w.pauses)
		w.mu.Unlock()
		if pauses != int64(wantPauses) || pauses == 0 || gauge != 0 || pausedTime < (5*time.Minute).Seconds()-1 {
			t.Errorf("metrics: %d pauses (observer: %d), paused gauge %d, %.0f s paused; want the observer's count, 0, about 300 s", pauses, wantPauses, gauge, pausedTime)
		}
	})
}

// storyObserver records a consumer's pauses and resumes in one log.
type storyObserver struct {
	consumer.NopObserver
	mu  sync.Mutex
	log []string
}

func (e *storyObserver) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *storyObserver) Paused(p consumer.Pause) {
	e.add(fmt.Sprintf("paused (%s) for %s, pause %d", p.Reason, p.For, p.Count))
}

func (e *storyObserver) Resumed(time.Duration) { e.add("resumed") }

// TestProbeHeldStory: one worker; the bank answers its first two calls
// with 503 and a Retry-After of 100 ms. The consumer pauses, holds the
// message it received with the first, runs it as the probe after the
// pause, holds it again when the bank is still down, and resumes once a
// probe gets through; the first message comes back after the pause (1 s:
// visibility is in whole seconds). Nothing is dead-lettered.
func TestProbeHeldStory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": redrive3(false)}, nil)
		for _, body := range []string{"charge 1", "charge 2", "charge 3"} {
			f.Put(q, body, "")
		}
		ev := &storyObserver{}
		var mu sync.Mutex
		calls, charged := 0, 0
		done := make(chan struct{})
		stop := startOnFake(t, f, q, consumer.Config{
			Observer: ev, Concurrency: 1,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				mu.Lock()
				defer mu.Unlock()
				if calls++; calls <= 2 { // the bank's answer
					return consumer.Unavailable(errors.New("bank: 503 Service Unavailable"), 100*time.Millisecond)
				}
				ev.add("charged: " + m.Body)
				if charged++; charged == 3 {
					close(done)
				}
				return nil
			}),
		})
		<-done
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"paused (unavailable) for 100ms, pause 1",
			"paused (unavailable) for 100ms, pause 2",
			"charged: charge 2",
			"resumed",
			"charged: charge 3",
			"charged: charge 1",
		}
		if !slices.Equal(ev.log, want) {
			t.Errorf("story:\n%s\nwant:\n%s", strings.Join(ev.log, "\n"), strings.Join(want, "\n"))
		}
		if sent := f.Sent(dlq); len(sent) != 0 {
			t.Errorf("%d dead letters, want none", len(sent))
		}
	})
}
