// Package opshttp serves the operational endpoints of a long-running
// worker over HTTP, so that a program does not write them itself:
//
//   - GET /healthz answers 200 while the process serves HTTP at all (a
//     liveness probe: a failing one means "restart me").
//   - GET /readyz answers 200 when every [Readier] in [Config.Ready] is
//     ready, and 503 with a short plain-text reason otherwise. A
//     *consumer.Consumer is a Readier: ready once Run passed its start-up
//     checks (the queue, its dead-letter queue, the visibility timeout),
//     not ready from the moment Run's context is cancelled (while the
//     drain runs), and not ready while its receives fail (the queue was
//     deleted, access was revoked) until one succeeds again; see
//     consumer.Consumer.Ready.
//   - GET /metrics, when [Config.Metrics] is set: a Prometheus page, from
//     package opshttp/prom (the OpenTelemetry Prometheus exporter with
//     sqsonce's defaults) or a handler of your own.
//
// A worker:
//
//	metrics, err := prom.New(prom.Config{})
//	if err != nil { ... }
//	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
//	defer mp.Shutdown(context.Background())
//	c, err := consumer.New(consumer.Config{ ..., MeterProvider: mp })
//	if err != nil { ... }
//	srv, err := opshttp.Listen(":9090", opshttp.Config{Ready: []opshttp.Readier{c}, Metrics: metrics})
//	if err != nil { ... }
//	// Shut the endpoints down after Run returned, not at SIGTERM: /readyz
//	// answers 503 through the drain, so that no new work is routed to the
//	// worker while it finishes what it holds.
//	defer srv.Shutdown(context.Background())
//	return c.Run(ctx)
//
// [New] returns the same routes on an *http.ServeMux, to serve on a server
// of your own or to add routes to (net/http/pprof, say).
//
// Several consumers in one process: list each in Config.Ready; /readyz is
// 200 only when all of them are ready, and its 503 gives the reason of
// each one that is not, one per line.
//
// The reasons are error text, which may echo what a client or a server
// wrote (SQS's error messages repeat parts of the request): each is cut to
// [MaxReason] bytes and every rune a terminal could act on (a line break,
// an ANSI escape, a bidi override) is escaped, so that a reason is one line
// of inert text. The responses are text/plain with
// X-Content-Type-Options: nosniff and Cache-Control: no-store.
//
// Dependencies: this package uses the standard library only. The
// Prometheus exporter, and with it the OpenTelemetry SDK and the
// Prometheus client, are linked only into a program that imports
// opshttp/prom; the core packages (consumer, dedupe, producer, outbox,
// idempotency, sqslambda) depend on the OpenTelemetry API alone.
//
// Lambda: nothing here applies to a function behind an event source
// mapping. Nothing routes work to it by readiness (the mapping polls the
// queue itself), nothing probes its liveness (Lambda reports errors,
// throttles and duration to CloudWatch), and its environment may be
// frozen between invocations, so no scraper can count on reading a
// /metrics page from it: push sqslambda's metrics with an OTLP exporter
// instead, flushing the MeterProvider (ForceFlush) before the handler
// returns.
package opshttp
