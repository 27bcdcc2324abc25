package prom_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sqsonce/sqsonce/opshttp"
	"github.com/sqsonce/sqsonce/opshttp/prom"
)

// A MeterProvider read by an Exporter, and the Exporter as /metrics of
// opshttp. Give the MeterProvider to consumer.Config (and the other
// components); here a counter of its own stands for them.
func Example() {
	metrics, err := prom.New(prom.Config{Options: []otelprom.Option{otelprom.WithoutTargetInfo()}})
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
	defer mp.Shutdown(context.Background())
	mux, err := opshttp.New(opshttp.Config{Metrics: metrics})
	if err != nil {
		panic(err)
	}

	settled, _ := mp.Meter("github.com/sqsonce/sqsonce").Int64Counter("sqsonce.messages.settled")
	settled.Add(context.Background(), 2)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if !strings.HasPrefix(line, "#") {
			fmt.Print(line)
		}
	}
	// Output:
	// sqsonce_messages_settled_total 2
}
