// Package faults is an http.RoundTripper that injects the failures AWS
// clients meet in the field: 500 and 503 answers, throttling errors,
// connection resets (before the request reaches the server, and after the
// server applied it but before the answer arrives) and slow responses.
// The reliability suite puts it between sqsonce and the local stack.
package faults

import (
	"bytes"
	"context"
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

// injector decides, call by call, which fault to inject, and counts them.
type injector struct {
	cfg Config

	mu     sync.Mutex
	rng    *rand.Rand
	calls  atomic.Int64
	counts sync.Map // kind → *atomic.Int64
	off    atomic.Bool
}

func newInjector(cfg Config) *injector {
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 2 * time.Second
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &injector{cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// SetEnabled turns injection on or off (on after New).
func (in *injector) SetEnabled(on bool) { in.off.Store(!on) }

// Calls is the number of calls seen.
func (in *injector) Calls() int64 { return in.calls.Load() }

// Counts returns the number of faults injected, by kind.
func (in *injector) Counts() map[string]int64 {
	out := map[string]int64{}
	in.counts.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Injected is the total number of faults injected (delays included).
func (in *injector) Injected() int64 {
	var n int64
	for _, c := range in.Counts() {
		n += c
	}
	return n
}

func (in *injector) count(kind string) {
	v, _ := in.counts.LoadOrStore(kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// decide picks the fault for one call ("" for none) after waiting out any
// injected delay; it returns ctx's error if ctx ends during the delay.
func (in *injector) decide(ctx context.Context) (string, error) {
	in.calls.Add(1)
	if in.off.Load() {
		return "", nil
	}
	in.mu.Lock()
	fault, kind, delay := in.rng.Float64(), in.rng.IntN(5), in.rng.Float64()
	d := time.Duration(in.rng.Int64N(int64(in.cfg.MaxDelay) + 1))
	in.mu.Unlock()
	if delay < in.cfg.DelayRate {
		in.count(KindDelay)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if fault >= in.cfg.ErrorRate {
		return "", nil
	}
	k := []string{KindServerError, KindUnavailable, KindThrottle, KindResetBefore, KindResetAfter}[kind]
	in.count(k)
	return k, nil
}

// errorAnswer is the AWS error a fault of kind stands for.
func errorAnswer(req *http.Request, kind string) (status int, code, msg string) {
	switch kind {
	case KindServerError:
		return http.StatusInternalServerError, "InternalFailure", "injected internal failure"
	case KindUnavailable:
		return http.StatusServiceUnavailable, "ServiceUnavailable", "injected: service unavailable"
	}
	return http.StatusBadRequest, throttleCode(req), "injected: rate exceeded"
}

// Transport injects faults into the calls it forwards to Base.
type Transport struct {
	Base http.RoundTripper
	*injector
}

// New returns a Transport over base (http.DefaultTransport when nil).
func New(base http.RoundTripper, cfg Config) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{Base: base, injector: newInjector(cfg)}
}

// RoundTrip forwards the call, or answers it with a fault.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	kind, err := t.decide(req.Context())
	if err != nil {
		drain(req)
		return nil, err
	}
	switch kind {
	case "":
		return t.Base.RoundTrip(req)
	case KindResetBefore:
		drain(req)
		return nil, fmt.Errorf("faults: injected reset before sending: %w", syscall.ECONNRESET)
	case KindResetAfter:
		resp, err := t.Base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("faults: injected reset after the server answered: %w", syscall.ECONNRESET)
	}
	status, code, msg := errorAnswer(req, kind)
	return errorResponse(req, status, code, msg), nil
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
