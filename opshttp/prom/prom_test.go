package prom_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/opshttp/prom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// page records one settled message through a MeterProvider reading from
// an Exporter made of cfg, and returns the Exporter's page.
func page(t *testing.T, cfg prom.Config) string {
	t.Helper()
	exp, err := prom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	settled, err := mp.Meter("github.com/sqsonce/sqsonce", metric.WithInstrumentationVersion("v0.1.0")).
		Int64Counter("sqsonce.messages.settled", metric.WithUnit("{message}"))
	if err != nil {
		t.Fatal(err)
	}
	settled.Add(context.Background(), 3)
	rec := httptest.NewRecorder()
	exp.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// series returns the page's lines that are not comments.
func series(page string) []string {
	var out []string
	for line := range strings.Lines(page) {
		if !strings.HasPrefix(line, "#") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func TestNoScopeLabelsUnlessAsked(t *testing.T) {
	t.Parallel()
	p := page(t, prom.Config{})
	if !strings.Contains(p, "\nsqsonce_messages_settled_total 3\n") {
		t.Errorf("page lacks sqsonce_messages_settled_total 3, with no labels:\n%s", p)
	}
	for _, s := range series(p) {
		if strings.Contains(s, "otel_scope_") {
			t.Errorf("series with the exporter's scope labels: %s", s)
		}
	}

	p = page(t, prom.Config{ScopeLabels: true})
	want := `sqsonce_messages_settled_total{otel_scope_name="github.com/sqsonce/sqsonce",otel_scope_schema_url="",otel_scope_version="v0.1.0"} 3`
	if !strings.Contains(p, want) {
		t.Errorf("ScopeLabels: page lacks\n%s\n%s", want, p)
	}
}

func TestRegistryAndOptions(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "worker_build_info", Help: "The build."})
	up.Set(1)
	reg.MustRegister(up)
	p := page(t, prom.Config{Registry: reg, Options: []otelprom.Option{otelprom.WithoutTargetInfo()}})
	if !strings.Contains(p, "\nworker_build_info 1\n") || !strings.Contains(p, "\nsqsonce_messages_settled_total 3\n") {
		t.Errorf("page with Registry lacks the registry's own collector or the MeterProvider's metric:\n%s", p)
	}
	if strings.Contains(p, "target_info") {
		t.Errorf("Options not applied: target_info on the page:\n%s", p)
	}
	if !strings.Contains(page(t, prom.Config{}), "target_info") {
		t.Error("without Options the exporter's target_info is missing: the default changed")
	}
}
