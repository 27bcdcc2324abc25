package idempotency_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/idempotency"
)

// counts reads the counter name from reader, summed by the value of key.
func counts(t *testing.T, reader *sdkmetric.ManualReader, name string, key attribute.Key) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is a %T, want a counter", name, m.Data)
			}
			for _, dp := range sum.DataPoints {
				v, _ := dp.Attributes.Value(key)
				got[v.AsString()] += dp.Value
			}
		}
	}
	return got
}

// A mixed run with a MeterProvider: sqsonce.idempotency.requests counts
// each outcome exactly, as Count does.
func TestRequestsMetric(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m := newMiddleware(t, idempotency.Config{MeterProvider: mp})
	var h http.Handler
	c := &credits{}
	var inner int
	h = m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			// The same request again while this one runs: 409.
			inner = post(h, http.MethodPost, "/busy", "busy", "alice", "x").Code
		}
		c.ServeHTTP(w, r)
	}))
	post(h, http.MethodPost, "/credits", "k1", "alice", "a") // executed
	post(h, http.MethodPost, "/credits", "k1", "alice", "a") // replayed
	post(h, http.MethodPost, "/credits", "k1", "alice", "a") // replayed
	post(h, http.MethodPost, "/credits", "k1", "alice", "b") // key_reused
	post(h, http.MethodPost, "/credits", "", "alice", "a")   // rejected: no key
	post(h, http.MethodPost, "/busy", "busy", "alice", "x")  // executed, with in_progress inside
	post(h, http.MethodGet, "/credits", "k9", "alice", "a")  // not counted: GET takes no key
	if inner != http.StatusConflict {
		t.Fatalf("the request repeated while running got %d, want 409", inner)
	}
	want := map[string]int64{"executed": 2, "replayed": 2, "key_reused": 1, "rejected": 1, "in_progress": 1}
	got := counts(t, reader, "sqsonce.idempotency.requests", "outcome")
	if len(got) != len(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	for o, n := range want {
		if got[o] != n {
			t.Fatalf("outcomes %v, want %v", got, want)
		}
	}
	for o := idempotency.OutcomeRejected; o <= idempotency.OutcomeCommitFailed; o++ {
		if m.Count(o) != got[o.String()] {
			t.Fatalf("Count(%s) = %d, metric %d", o, m.Count(o), got[o.String()])
		}
	}
}
