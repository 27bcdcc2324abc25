package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/idempotency"
)

// benchHandler is a small JSON API handler: it reads the body and answers
// 201 with a short JSON document.
var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/credits/c-1")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"credit_id":"c-1","account":"acct-42","amount":500}`)
})

const benchBody = `{"account":"acct-42","amount":500}`

func benchRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(benchBody))
	r.Header.Set("Authorization", "Bearer alice")
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set(idempotency.HeaderKey, key)
	}
	return r
}

// BenchmarkMiddleware measures the middleware's overhead per request on the
// memory store (so the figure is the middleware's own cost, not a store's
// round trip): Bare is the handler alone, NewKey a first request (claim,
// run, store), Replay a retry answered from the stored record.
//
// cpu-ns/op is the process's CPU time per request (user plus system, GC
// included), steadier than ns/op on a shared machine.
//
//	go test -run '^$' -bench BenchmarkMiddleware -benchmem ./idempotency/
func BenchmarkMiddleware(b *testing.B) {
	b.Run("Bare", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			benchHandler.ServeHTTP(httptest.NewRecorder(), benchRequest(""))
		}
	})
	b.Run("NewKey", func(b *testing.B) {
		mw, err := idempotency.New(idempotency.Config{Store: idempotency.NewMemory(idempotency.MemoryConfig{}), ScopeFunc: scope})
		if err != nil {
			b.Fatal(err)
		}
		h := mw.Wrap(benchHandler)
		b.ReportAllocs()
		defer reportCPU(b)()
		i := 0
		for b.Loop() {
			i++
			w := httptest.NewRecorder()
			h.ServeHTTP(w, benchRequest("key-"+strconv.Itoa(i)))
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
	b.Run("Replay", func(b *testing.B) {
		mw, err := idempotency.New(idempotency.Config{Store: idempotency.NewMemory(idempotency.MemoryConfig{}), ScopeFunc: scope})
		if err != nil {
			b.Fatal(err)
		}
		h := mw.Wrap(benchHandler)
		h.ServeHTTP(httptest.NewRecorder(), benchRequest("key"))
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, benchRequest("key"))
			if w.Header().Get(idempotency.HeaderReplayed) != "true" {
				b.Fatal("not a replay")
			}
		}
	})
}

// reportCPU starts measuring CPU time; the function it returns reports it
// per iteration.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if used := cpuTime() - start; used > 0 && b.N > 0 {
			b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
		}
	}
}
