package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// observability is the worker's telemetry and its HTTP endpoints:
// /metrics (Prometheus text), /healthz (the process is alive) and /readyz
// (start-up validation passed, the worker is not draining, and its
// receives succeed).
type observability struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	ready atomic.Bool
	// receiving, once set, is the consumer's Ready: an error while its
	// receives fail (the queue is gone, access to it was revoked).
	receiving atomic.Pointer[func() error]
	stop      []func(context.Context) error
	srv       *http.Server
}

// otlpWanted reports whether the standard OTEL_* variables ask for OTLP
// export of signal ("TRACES" or "METRICS").
func otlpWanted(getenv func(string) string, signal string) bool {
	switch getenv("OTEL_" + signal + "_EXPORTER") {
	case "otlp":
		return true
	case "none":
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

// newObservability sets up the providers and, when addr is set, serves the
// endpoints on it. OTLP exporters read the rest of their settings
// (endpoint, headers, protocol options) from the OTEL_* variables
// themselves.
func newObservability(ctx context.Context, addr string, getenv func(string) string, logger *zap.Logger) (*observability, error) {
	o := &observability{}
	var readers []sdkmetric.Option
	registry := prometheus.NewRegistry()
	if addr != "" {
		exp, err := otelprom.New(otelprom.WithRegisterer(registry))
		if err != nil {
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(exp))
	}
	if otlpWanted(getenv, "METRICS") {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(readers...)
		o.mp = mp
		o.stop = append(o.stop, mp.Shutdown)
	}
	if otlpWanted(getenv, "TRACES") {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		o.tp = tp
		o.stop = append(o.stop, tp.Shutdown)
	}
	if addr == "" {
		return o, nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !o.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if f := o.receiving.Load(); f != nil {
			if err := (*f)(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-http-addr: %w", err)
	}
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("worker: HTTP endpoints stopped", zap.Error(err))
		}
	}()
	logger.Info("worker: serving /metrics, /healthz and /readyz", zap.String("http_addr", ln.Addr().String()))
	return o, nil
}

// close flushes the exporters and stops the endpoints.
func (o *observability) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, stop := range o.stop {
		_ = stop(ctx)
	}
	if o.srv != nil {
		_ = o.srv.Shutdown(ctx)
	}
}
