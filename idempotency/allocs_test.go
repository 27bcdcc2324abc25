package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/sqsonce/sqsonce/idempotency"
)

// TestAllocsPerRequest bounds what the middleware allocates for a request
// on the memory store, the requests and recorders made beforehand: a new
// key (claim, lease keeper, run, store) and a replay. The keeper of a
// request that ends before its first extension is a timer, not a
// goroutine with a ticker, a channel and a WaitGroup; the record key and
// the fingerprint are hashed without a hash object or a hex buffer each.
func TestAllocsPerRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	const runs = 200
	for _, tc := range []struct {
		name   string
		key    func(i int) string
		status int
		max    float64
	}{
		{"new key", func(i int) string { return "key-" + strconv.Itoa(i) }, http.StatusCreated, 58},
		{"replay", func(int) string { return "key" }, http.StatusCreated, 21},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mw, err := idempotency.New(idempotency.Config{Store: idempotency.NewMemory(idempotency.MemoryConfig{}), ScopeFunc: scope})
			if err != nil {
				t.Fatal(err)
			}
			h := mw.Wrap(benchHandler)
			h.ServeHTTP(httptest.NewRecorder(), benchRequest("key")) // the replays' record
			reqs := make([]*http.Request, runs+1)
			recs := make([]*httptest.ResponseRecorder, runs+1)
			for i := range reqs {
				reqs[i], recs[i] = benchRequest(tc.key(i)), httptest.NewRecorder()
			}
			i := 0
			got := testing.AllocsPerRun(runs, func() {
				h.ServeHTTP(recs[i], reqs[i])
				i++
			})
			for _, w := range recs {
				if w.Code != tc.status {
					t.Fatalf("status %d, want %d", w.Code, tc.status)
				}
			}
			if got > tc.max {
				t.Errorf("%.0f allocations per request, want at most %.0f", got, tc.max)
			}
			t.Logf("%.0f allocations per request", got)
		})
	}
}

// TestReplayHeadersOwnValues: a replay's header values share one array;
// appending to one header's values must not change the next header's,
// nor the stored response that the next replay writes.
func TestReplayHeadersOwnValues(t *testing.T) {
	mw, err := idempotency.New(idempotency.Config{Store: idempotency.NewMemory(idempotency.MemoryConfig{}), ScopeFunc: scope})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Wrap(benchHandler)
	h.ServeHTTP(httptest.NewRecorder(), benchRequest("key"))
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, benchRequest("key"))
		if got := w.Header().Get(idempotency.HeaderReplayed); got != "true" {
			t.Fatalf("%s: %q, want true", idempotency.HeaderReplayed, got)
		}
		for _, name := range []string{"Content-Type", "Location", idempotency.HeaderReplayed} {
			w.Header()[name] = append(w.Header()[name], "appended")
		}
		if got := w.Header().Values("Location"); len(got) != 2 || got[0] != "/credits/c-1" {
			t.Fatalf("Location after appends to each header: %q, want [/credits/c-1 appended]", got)
		}
		if got := w.Header().Values("Content-Type"); len(got) != 2 || got[0] != "application/json" {
			t.Fatalf("Content-Type after appends to each header: %q, want [application/json appended]", got)
		}
	}
}
