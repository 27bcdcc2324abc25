// Package prom exposes the metrics of an OpenTelemetry MeterProvider as a
// Prometheus page, for GET /metrics of package opshttp: the OpenTelemetry
// Prometheus exporter, set up with sqsonce's defaults.
//
//	metrics, err := prom.New(prom.Config{})
//	if err != nil { ... }
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)) // beside an OTLP reader, if any
//	defer mp.Shutdown(context.Background())
//	// consumer.Config{MeterProvider: mp, ...}, and so on for every component
//	srv, err := opshttp.Listen(":9090", opshttp.Config{Ready: []opshttp.Readier{c}, Metrics: metrics})
//
// Names follow the exporter's translation: dots become underscores, the
// unit and, on counters, _total are appended (sqsonce.messages.settled is
// sqsonce_messages_settled_total).
//
// Unlike the exporter's own defaults, the series carry no otel_scope_name,
// otel_scope_version and otel_scope_schema_url labels (see
// [Config.ScopeLabels]), and the exporter registers with a registry of its
// own rather than prometheus.DefaultRegisterer.
//
// This package is separate from opshttp so that only a program that wants
// a Prometheus page links the OpenTelemetry SDK and the Prometheus client;
// sqsonce's other packages depend on the OpenTelemetry API alone.
package prom

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Config configures an Exporter. The zero Config is ready to use.
type Config struct {
	// ScopeLabels keeps the otel_scope_name, otel_scope_version and
	// otel_scope_schema_url labels (and an otel_scope_ label per scope
	// attribute) that the exporter adds to every series by default.
	// Defaults to false: sqsonce's instruments all belong to one scope, so
	// the labels repeat one value on every series, and a query or an
	// alert need never name them. Keep them when two instrumentation
	// libraries in the program record a metric of the same name and
	// attributes: without the scope labels their series would collide
	// and the page would fail.
	ScopeLabels bool

	// Registry is where the exporter registers its collector, and what
	// the page gathers. Defaults to a new registry of the Exporter's own,
	// not prometheus.DefaultRegisterer: the page shows what the
	// MeterProvider records and nothing else. Pass one to add collectors
	// of your own, e.g. collectors.NewGoCollector() for the Go runtime.
	Registry *prometheus.Registry

	// Options are further options of the OpenTelemetry exporter, applied
	// after the Exporter's own (its registry and, unless ScopeLabels,
	// WithoutScopeInfo), e.g. otelprom.WithoutTargetInfo() or
	// otelprom.WithNamespace. Set the registry with Registry, not with
	// otelprom.WithRegisterer. Defaults to none.
	Options []otelprom.Option
}

// Exporter is a metric reader for an OpenTelemetry MeterProvider
// (sdkmetric.WithReader(e)) and the http.Handler of its Prometheus page
// (opshttp.Config.Metrics). Each request reads the MeterProvider's
// current values.
type Exporter struct {
	sdkmetric.Reader
	page http.Handler
}

// New returns an Exporter configured by cfg.
func New(cfg Config) (*Exporter, error) {
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	opts := []otelprom.Option{otelprom.WithRegisterer(reg)}
	if !cfg.ScopeLabels {
		opts = append(opts, otelprom.WithoutScopeInfo())
	}
	exp, err := otelprom.New(append(opts, cfg.Options...)...)
	if err != nil {
		return nil, fmt.Errorf("prom: OpenTelemetry Prometheus exporter: %w", err)
	}
	return &Exporter{Reader: exp, page: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}

// ServeHTTP writes the page in the format the request accepts (the
// Prometheus text format by default).
func (e *Exporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.page.ServeHTTP(w, r)
}

var _ sdkmetric.Reader = (*Exporter)(nil)
