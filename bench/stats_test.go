package main

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

func TestSample(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s             sample
		med, lo, hi   float64
		str, ratioStr string
	}{
		{sample{5, 1, 3}, 3, 1, 5, "3.00 (1.00–5.00)", "3.00 (1.00–5.00)"},
		{sample{4, 1, 3, 2}, 2.5, 1, 4, "2.50 (1.00–4.00)", "2.50 (1.00–4.00)"},
		{one(21520), 21520, 21520, 21520, "21,520", "21520.00"},
		{nil, 0, 0, 0, "-", "-"},
	} {
		if c.s.med() != c.med || c.s.lo() != c.lo || c.s.hi() != c.hi {
			t.Errorf("%v: med %g lo %g hi %g, want %g %g %g", []float64(c.s), c.s.med(), c.s.lo(), c.s.hi(), c.med, c.lo, c.hi)
		}
		if c.s.String() != c.str || c.s.ratioString() != c.ratioStr {
			t.Errorf("%v: %q, %q; want %q, %q", []float64(c.s), c.s.String(), c.s.ratioString(), c.str, c.ratioStr)
		}
	}
	// The ratio pairs each sqsonce run with the plain run beside it.
	if got := ratios(sample{90, 100, 50}, sample{100, 200, 50}); got.med() != 0.9 || got.lo() != 0.5 || got.hi() != 1 {
		t.Errorf("ratios = %v", got)
	}
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    row
		want string
	}{
		// The median ratio decides, not the best run.
		{row{value: sample{80, 95, 85}, limit: sample{100, 100, 100}, ratio: sample{0.8, 0.95, 0.85}}.with(atLeast(0.9)), "no"},
		{row{value: sample{92, 80, 95}, limit: sample{100, 100, 100}, ratio: sample{0.92, 0.8, 0.95}}.with(atLeast(0.9)), "yes"},
		{row{value: sample{1.2}, limit: sample{1}}.with(atMost(1.1)), "no"},
		{row{value: sample{1.05}, limit: sample{1}}.with(atMost(1.1)), "yes"},
		{row{value: sample{0.3}}.with(valueAtMost(0.22)), "no"},
		{row{value: sample{0.2}}.with(valueAtMost(0.22)), "yes"},
		{row{value: sample{0.2}}, ""},
		// A row with a target but no figure fails it.
		{row{limit: sample{1}}.with(atLeast(0.9)), "no"},
	} {
		if got := c.r.verdict(); got != c.want {
			t.Errorf("%+v: verdict %q, want %q", c.r, got, c.want)
		}
	}
}

func TestGrowthPerMessage(t *testing.T) {
	t.Parallel()
	// 8 bytes per message over 200,000 messages, plus ±100 KB of noise
	// that alternates from one point to the next.
	const n, per = 200000, 8.0
	points := make([]float64, checkpoints)
	for k := range points {
		noise := 100e3
		if k%2 == 1 {
			noise = -noise
		}
		points[k] = 2<<20 + per*float64(k+1)*n/checkpoints + noise
	}
	if got := growthPerMessage(points, n); math.Abs(got-per) > 1 {
		t.Errorf("growth = %.2f B/msg, want %.0f ± 1", got, per)
	}
	if got := growthPerMessage([]float64{1 << 20}, n); got != 0 {
		t.Errorf("growth of one point = %g, want 0", got)
	}
}

// TestMemoryRunSeesALeak: a handler that keeps 1 KiB per message shows as
// about 1 KiB per message of live-heap growth, so the memory row measures
// retention rather than GC pacing.
func TestMemoryRunSeesALeak(t *testing.T) {
	testenv.SQS(t)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	e, err := newEnv(context.Background(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)
	b := &bench{ctx: context.Background(), client: client, env: e, errw: testWriter{t}}
	var mu sync.Mutex
	var kept [][]byte
	leak := consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
		mu.Lock()
		kept = append(kept, make([]byte, 1024))
		mu.Unlock()
		return nil
	})
	const n = 2000
	r, err := b.memoryRun(n, leak)
	if err != nil {
		t.Fatal(err)
	}
	got := growthPerMessage(r.points, n)
	t.Logf("growth with a 1 KiB-per-message leak: %.0f B/msg", got)
	if got < 700 || got > 1600 {
		t.Errorf("growth with a 1 KiB-per-message leak = %.0f B/msg, want about 1024 (points %v)", got, r.points)
	}
	if len(kept) != n {
		t.Errorf("handler kept %d buffers, want %d", len(kept), n)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestListSchedule: the ideal time of handlers run in order on the first
// free worker.
func TestListSchedule(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		times   []time.Duration
		workers int
		want    time.Duration
	}{
		{[]time.Duration{20 * ms, 20 * ms, 20 * ms, 20 * ms}, 2, 40 * ms},
		{[]time.Duration{20 * ms, 20 * ms, 20 * ms}, 2, 40 * ms},
		// The long one goes to the first worker; the short ones share the
		// second: the long one sets the time.
		{[]time.Duration{100 * ms, ms, ms, ms}, 2, 100 * ms},
		// The long one starts last, on the worker free first.
		{[]time.Duration{5 * ms, 10 * ms, 100 * ms}, 2, 105 * ms},
		{nil, 3, 0},
	} {
		if got := listSchedule(c.times, c.workers); got != c.want {
			t.Errorf("listSchedule(%v, %d) = %s, want %s", c.times, c.workers, got, c.want)
		}
	}
}
