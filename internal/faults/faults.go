// Package faults is an http.RoundTripper that injects the failures AWS
// clients meet in the field: 500 and 503 answers, throttling errors,
// connection resets (before the request reaches the server, and after the
// server applied it but before the answer arrives) and slow responses.
// The reliability suite puts it between sqsonce and the local stack.
package faults

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Kinds of injected fault, as counted by [Transport.Counts].
const (
	KindServerError = "500"
	KindUnavailable = "503"
	KindThrottle    = "throttle"
	KindResetBefore = "reset_before" // the server never saw the request
	KindResetAfter  = "reset_after"  // the server applied it; the answer is lost
	KindDelay       = "delay"
)

// Config says how often to inject what.
type Config struct {
	// ErrorRate is the fraction of calls answered with an injected error,
	// spread evenly over 500, 503, throttling and the two kinds of reset.
	ErrorRate float64
	// DelayRate is the fraction of calls delayed by up to MaxDelay.
	DelayRate float64
	// MaxDelay defaults to 2s.
	MaxDelay time.Duration
	// Seed makes the sequence of faults repeatable; 0 picks one at random.
	Seed uint64
}

// Transport injects faults into the calls it forwards to Base.
type Transport struct {
	Base http.RoundTripper
	cfg  Config

	mu     sync.Mutex
	rng    *rand.Rand
	calls  atomic.Int64
	counts sync.Map // kind → *atomic.Int64
	off    atomic.Bool
}

// New returns a Transport over base (http.DefaultTransport when nil).
func New(base http.RoundTripper, cfg Config) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 2 * time.Second
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Transport{Base: base, cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// SetEnabled turns injection on or off (on after New).
func (t *Transport) SetEnabled(on bool) { t.off.Store(!on) }

// Calls is the number of calls seen.
func (t *Transport) Calls() int64 { return t.calls.Load() }

// Counts returns the number of faults injected, by kind.
func (t *Transport) Counts() map[string]int64 {
	out := map[string]int64{}
	t.counts.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Injected is the total number of faults injected (delays included).
func (t *Transport) Injected() int64 {
	var n int64
	for _, c := range t.Counts() {
		n += c
	}
	return n
}

func (t *Transport) count(kind string) {
	v, _ := t.counts.LoadOrStore(kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (t *Transport) roll() (fault float64, kind int, delay float64, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng.Float64(), t.rng.IntN(5), t.rng.Float64(), time.Duration(t.rng.Int64N(int64(t.cfg.MaxDelay) + 1))
}

// RoundTrip forwards the call, or answers it with a fault.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.calls.Add(1)
	if t.off.Load() {
		return t.Base.RoundTrip(req)
	}
	fault, kind, delay, d := t.roll()
	if delay < t.cfg.DelayRate {
		t.count(KindDelay)
		select {
		case <-time.After(d):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if fault >= t.cfg.ErrorRate {
		return t.Base.RoundTrip(req)
	}
	switch kind {
	case 0:
		t.count(KindServerError)
		return errorResponse(req, http.StatusInternalServerError, "InternalFailure", "injected internal failure"), nil
	case 1:
		t.count(KindUnavailable)
		return errorResponse(req, http.StatusServiceUnavailable, "ServiceUnavailable", "injected: service unavailable"), nil
	case 2:
		t.count(KindThrottle)
		return errorResponse(req, http.StatusBadRequest, throttleCode(req), "injected: rate exceeded"), nil
	case 3:
		t.count(KindResetBefore)
		drain(req)
		return nil, fmt.Errorf("faults: injected reset before sending: %w", syscall.ECONNRESET)
	default:
		resp, err := t.Base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.count(KindResetAfter)
		return nil, fmt.Errorf("faults: injected reset after the server answered: %w", syscall.ECONNRESET)
	}
}

func drain(req *http.Request) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
}

// throttleCode picks the throttling error code each service really sends.
func throttleCode(req *http.Request) string {
	target := req.Header.Get("X-Amz-Target")
	switch {
	case strings.HasPrefix(target, "DynamoDB"):
		codes := []string{"ProvisionedThroughputExceededException", "ThrottlingException"}
		return codes[len(target)%len(codes)]
	case strings.HasPrefix(target, "AmazonSQS"):
		codes := []string{"RequestThrottled", "ThrottlingException"}
		return codes[len(target)%len(codes)]
	}
	return "ThrottlingException"
}

// errorResponse is an AWS JSON-protocol error answer.
func errorResponse(req *http.Request, status int, code, msg string) *http.Response {
	drain(req)
	body := fmt.Sprintf(`{"__type":%q,"message":%q}`, code, msg)
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Query-Error", code+";Sender")
	h.Set("X-Amzn-Requestid", "injected")
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader([]byte(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// IsInjected reports whether err came from this package.
func IsInjected(err error) bool {
	return err != nil && errors.Is(err, syscall.ECONNRESET) && strings.Contains(err.Error(), "faults: injected")
}
