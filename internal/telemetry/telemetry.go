// Package telemetry is sqsonce's OpenTelemetry instrumentation, shared by
// the consumer and the Lambda adapter: one span per message processed,
// parented to the producer's trace context carried in the message
// attributes, and the metrics listed in docs/observability.md. It
// depends on the OpenTelemetry API only and knows nothing of the
// consumer's types: one adapter in package consumer (telemetry.go)
// feeds it the per-message path's events, for the consumer and the Lambda
// adapter alike.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// SemconvVersion is the version of OpenTelemetry's semantic conventions
// whose names the spans and metrics follow.
const SemconvVersion = "1.43.0"

// ScopeName is the instrumentation scope of every span and metric.
const ScopeName = "github.com/sqsonce/sqsonce"

// Propagator is the trace-context format carried in message attributes:
// W3C traceparent and tracestate.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Carrier adapts SQS message attributes to a propagation carrier: each
// field is a String attribute of the same name.
type Carrier map[string]types.MessageAttributeValue

// Get returns the String value of an attribute.
func (c Carrier) Get(key string) string {
	if v, ok := c[key]; ok && aws.ToString(v.DataType) == "String" {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// Set adds a String attribute.
func (c Carrier) Set(key, value string) {
	c[key] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(value)}
}

// Keys lists the attributes' names.
func (c Carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Fields are the attribute names a trace context uses.
func Fields() []string { return Propagator.Fields() }

// Inject adds ctx's trace context to attrs when room is left under max
// attributes; it reports whether it did. A message's own attributes win:
// the trace context is the part left out when there is no room.
func Inject(ctx context.Context, attrs map[string]types.MessageAttributeValue, max int) bool {
	return InjectAs(ctx, attrs, max, func(v types.MessageAttributeValue) types.MessageAttributeValue { return v })
}

// InjectAs is [Inject] for attributes of another service's type (SNS's
// message attributes): conv turns the SQS String attribute of each field
// into one of that type.
func InjectAs[V any](ctx context.Context, attrs map[string]V, max int, conv func(types.MessageAttributeValue) V) bool {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return false
	}
	c := Carrier{}
	Propagator.Inject(ctx, c)
	n := len(attrs)
	for k := range c {
		if _, ok := attrs[k]; !ok {
			n++
		}
	}
	if n > max {
		return false
	}
	for k, v := range c {
		attrs[k] = conv(v)
	}
	return true
}

// Consumer instruments one queue's consumer (or Lambda event source).
// A nil *Consumer does nothing.
//
// Its per-message methods are built to cost next to nothing beyond the
// SDK's own work: the attribute sets of the metrics and the options of
// the spans are built once (per queue, outcome, operation) and passed as
// ready slices, so a measurement allocates nothing; a span the sampler
// drops is not kept and gets no attributes; a recorded span gets its
// per-message attributes in one call, when it ends.
type Consumer struct {
	tracer trace.Tracer
	system []attribute.KeyValue

	deadLetters, leaseLost, hbFailed, settleFailed metric.Int64Counter
	held                                           metric.Int64Counter
	nextDue                                        metric.Float64Gauge
	// counted are the counters bumped per message or per call (see
	// counter): counted here, in each attribute set's atomics, and
	// observed at collection, so the path makes no SDK call for them.
	counted [numCounted]metric.Int64ObservableCounter
	// metrics is set when a MeterProvider is.
	metrics bool
	// inFlight is the messages received and not yet settled, counted here
	// and observed at collection (sqsonce.messages.in_flight): two SDK
	// measurements per message fewer than an UpDownCounter's.
	inFlight            atomic.Int64
	reg                 metric.Registration // the collection callback; nil: none
	processDur, callDur metric.Float64Histogram
	batch               metric.Int64Histogram

	// Back-pressure: 1 while paused, pauses by reason, and the time paused.
	paused     metric.Int64UpDownCounter
	pauses     metric.Int64Counter
	pausedTime metric.Float64Counter

	spans spanTable // the recorded spans of the messages in flight

	// due holds the not-before times of the messages this process held,
	// by dedupe key, while they are ahead (see Held).
	dueMu sync.Mutex
	due   map[string]time.Time
	next  time.Time // the earliest of due while ahead; zero when unknown

	// Attribute sets and span options, built once: building them for
	// every message cost more than recording the measurements. Read
	// without a lock; a new entry copies the map (entries are few).
	base *measureOpts // c.system alone
	// outcomes are the settled sets of the outcomes (see outcomeIndex)
	// with no failure class, found without hashing the key.
	outcomes [len(outcomeNames)]*measureOpts
	receive  *measureOpts // c.system, operation receive
	process  *measureOpts // c.system, operation process
	buildM   sync.Mutex
	opts     atomic.Pointer[map[optKey]*measureOpts]
	extra    map[optKey]*measureOpts // the sets beyond maxOpts (buildM held)
	queues   atomic.Pointer[map[string]*queueSpans]
	// url and own are the queue the Consumer was made for and its spans'
	// options, found without hashing the URL (every message of a worker
	// comes from it; a Lambda adapter's may come from others).
	url string
	own *queueSpans
}

// optKey names an attribute set: c.system plus one or two string
// attributes (k2 "" for one).
type optKey struct{ k1, v1, k2, v2 string }

// measureOpts is one attribute set as the ready options of an Add and of
// a Record: passing a slice that exists allocates nothing, where a
// variadic argument built at the call would.
type measureOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
	// n is the cumulative count of each counted instrument (see counter)
	// with this attribute set, observed at collection when not 0.
	n [numCounted]atomic.Int64
}

// counter names a counter bumped per message or per SQS call: an
// observable counter whose count is kept in measureOpts.n, since a
// synchronous counter's Add costs the SDK's attribute and lock work on
// every call.
type counter int

const (
	cReceived counter = iota // messaging.client.consumed.messages
	cSettled                 // sqsonce.messages.settled
	cCalls                   // sqsonce.sqs.calls
	cErrs                    // sqsonce.sqs.errors
	cSent                    // messaging.client.sent.messages
	numCounted
)

// count adds n to o's count of k.
func (o *measureOpts) count(k counter, n int64) { o.n[k].Add(n) }

func newMeasureOpts(kvs ...attribute.KeyValue) *measureOpts {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return &measureOpts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// maxOpts bounds the attribute sets a Consumer keeps for lookup without
// a lock: beyond it (a failure class or pause reason of unbounded
// values), a set is found under a lock, or built for each measurement
// when it carries no count.
const maxOpts = 1024

// queueSpans is what the process spans of one queue share, and its
// receive spans: the span name and the start options (kind and the
// attributes known at creation, for samplers).
type queueSpans struct {
	name    string
	start   []trace.SpanStartOption
	receive string
	// receiveStart are the start options of a receive span that brought
	// i messages (i up to maxReceive), messaging.batch.message_count
	// among them.
	receiveStart [maxReceive + 1][]trace.SpanStartOption
	dest         string
}

// maxReceive is the most messages a ReceiveMessage returns.
const maxReceive = 10

// receiveOptions returns the start options of a receive span that
// brought n messages, with its start time, in *buf (grown as needed):
// Start reads its options and keeps none, so the slice is reused.
func (q *queueSpans) receiveOptions(buf *[]trace.SpanStartOption, n int, start time.Time) []trace.SpanStartOption {
	base := q.receiveStart[min(n, maxReceive)]
	if n > maxReceive {
		base = receiveStartOptions(q.dest, n)
	}
	*buf = append(append((*buf)[:0], base...), trace.WithTimestamp(start))
	return *buf
}

// receiveOpts holds the option slices of receive spans between uses.
var receiveOpts = sync.Pool{New: func() any { return new([]trace.SpanStartOption) }}

// receiveStartOptions are the start options of a receive span from the
// queue named dest that brought n messages.
func receiveStartOptions(dest string, n int) []trace.SpanStartOption {
	return []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			semconv.MessagingSystemAWSSQS,
			semconv.MessagingDestinationName(dest),
			semconv.MessagingOperationTypeReceive,
			semconv.MessagingOperationName("receive"),
			semconv.MessagingBatchMessageCount(n),
		),
	}
}

// spanRec is a recorded span in flight and the per-message attributes it
// gets when it ends.
type spanRec struct {
	span      trace.Span
	messageID string
	key       string
	receives  int
}

// spanTable maps a message's key to its recorded span: maps under
// mutexes, in shards picked by the key's hash (sync.Map allocated a node
// per message, and with one lock the workers of a busy consumer queued on
// it at every span's start and end). n counts the entries, so that while
// none is kept (every span sampled out) a look-up takes no lock: a
// message's own swap happens before its look-ups.
type spanTable struct {
	shards [spanShards]spanShard
	n      atomic.Int64
}

// spanShards is the number of shards of a spanTable.
const spanShards = 16

// spanShard is one shard of a spanTable, padded to a cache line of its
// own.
type spanShard struct {
	mu sync.Mutex
	m  map[any]spanRec
	_  [48]byte
}

// spanSeed seeds the hash that picks a key's shard.
var spanSeed = maphash.MakeSeed()

func (t *spanTable) shard(key any) *spanShard {
	return &t.shards[maphash.Comparable(spanSeed, key)%spanShards]
}

func (t *spanTable) swap(key any, r spanRec) (spanRec, bool) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[key]
	if s.m == nil {
		s.m = map[any]spanRec{}
	}
	s.m[key] = r
	if !ok {
		t.n.Add(1)
	}
	return old, ok
}

func (t *spanTable) take(key any) (spanRec, bool) {
	if t.n.Load() == 0 {
		return spanRec{}, false
	}
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[key]
	if ok {
		delete(s.m, key)
		t.n.Add(-1)
	}
	return r, ok
}

func (t *spanTable) load(key any) (spanRec, bool) {
	if t.n.Load() == 0 {
		return spanRec{}, false
	}
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[key]
	return r, ok
}

// NewConsumer returns the instrumentation of queueURL, or nil when both
// providers are nil (telemetry off: nothing is wrapped, nothing costs).
func NewConsumer(tp trace.TracerProvider, mp metric.MeterProvider, queueURL string) *Consumer {
	if tp == nil && mp == nil {
		return nil
	}
	c := &Consumer{system: systemAttrs(queueURL)}
	c.base = newMeasureOpts(c.system...)
	c.receive = newMeasureOpts(append([]attribute.KeyValue{semconv.MessagingOperationName("receive"), semconv.MessagingOperationTypeReceive}, c.system...)...)
	c.process = newMeasureOpts(append([]attribute.KeyValue{semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess}, c.system...)...)
	c.opts.Store(&map[optKey]*measureOpts{})
	for i, o := range outcomeNames {
		c.outcomes[i] = c.attrs("sqsonce.outcome", o, "sqsonce.failure_class", "")
	}
	c.queues.Store(&map[string]*queueSpans{})
	if tp != nil {
		c.tracer = tp.Tracer(ScopeName)
		if queueURL != "" {
			c.own = c.queueSpans(queueURL)
			c.url = queueURL
		}
	}
	if mp == nil {
		return c
	}
	c.metrics = true
	m := mp.Meter(ScopeName)
	c.counted[cReceived], _ = m.Int64ObservableCounter("messaging.client.consumed.messages", metric.WithDescription("Messages received from SQS."), metric.WithUnit("{message}"))
	c.counted[cSettled], _ = m.Int64ObservableCounter("sqsonce.messages.settled", metric.WithDescription("Messages settled, by outcome and failure class."), metric.WithUnit("{message}"))
	c.deadLetters, _ = m.Int64Counter("sqsonce.dead_letters", metric.WithDescription("Sends to the dead-letter queue, by result (sent, failed, refused)."), metric.WithUnit("{message}"))
	c.leaseLost, _ = m.Int64Counter("sqsonce.leases.lost", metric.WithDescription("Messages whose visibility or dedupe lease was lost: their effect may repeat."), metric.WithUnit("{message}"))
	c.hbFailed, _ = m.Int64Counter("sqsonce.heartbeat.failures", metric.WithDescription("Visibility extensions that failed."), metric.WithUnit("{message}"))
	c.settleFailed, _ = m.Int64Counter("sqsonce.settle.failures", metric.WithDescription("Deletes and visibility changes still failing after their retries (the message stays invisible and is retried)."), metric.WithUnit("{message}"))
	c.counted[cCalls], _ = m.Int64ObservableCounter("sqsonce.sqs.calls", metric.WithDescription("SQS API calls, by operation."), metric.WithUnit("{call}"))
	c.counted[cErrs], _ = m.Int64ObservableCounter("sqsonce.sqs.errors", metric.WithDescription("SQS API calls that failed, by operation."), metric.WithUnit("{call}"))
	c.held, _ = m.Int64Counter("sqsonce.messages.held", metric.WithDescription("Messages received before their not-before time and held, by how (visibility, resend)."), metric.WithUnit("{message}"))
	c.nextDue, _ = m.Float64Gauge("sqsonce.messages.held.next_due", metric.WithDescription("The earliest not-before time (Unix seconds) of the messages this process held that are not yet due, as of its last hold or held run; 0 when none."), metric.WithUnit("s"))
	inFlight, _ := m.Int64ObservableUpDownCounter("sqsonce.messages.in_flight", metric.WithDescription("Messages received and not yet settled."), metric.WithUnit("{message}"))
	c.processDur, _ = m.Float64Histogram("messaging.process.duration", metric.WithDescription("Time the middleware and handler took per message."), metric.WithUnit("s"))
	c.callDur, _ = m.Float64Histogram("messaging.client.operation.duration", metric.WithDescription("Duration of SQS API calls."), metric.WithUnit("s"))
	c.counted[cSent], _ = m.Int64ObservableCounter("messaging.client.sent.messages", metric.WithDescription("Messages the consumer sent to SQS (dead letters, held messages sent again), successfully or not."), metric.WithUnit("{message}"))
	c.batch, _ = m.Int64Histogram("sqsonce.receive.batch_size", metric.WithDescription("Messages per ReceiveMessage response."), metric.WithUnit("{message}"))
	c.paused, _ = m.Int64UpDownCounter("sqsonce.consumer.paused", metric.WithDescription("1 while the consumer is paused for an unavailable downstream (no receives, held messages not run), else 0."), metric.WithUnit("{consumer}"))
	c.pauses, _ = m.Int64Counter("sqsonce.consumer.pauses", metric.WithDescription("Pauses for an unavailable downstream, by reason (unavailable, breaker): an outage's first and one after each failed probe."), metric.WithUnit("{pause}"))
	c.pausedTime, _ = m.Float64Counter("sqsonce.consumer.paused.time", metric.WithDescription("Time paused for an unavailable downstream, counted when the consumer resumes."), metric.WithUnit("s"))
	insts := []metric.Observable{inFlight}
	for _, in := range c.counted {
		if in != nil {
			insts = append(insts, in)
		}
	}
	c.reg, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if inFlight != nil {
			o.ObserveInt64(inFlight, c.inFlight.Load(), c.base.obs...)
		}
		c.observe(o, c.receive)
		for _, s := range *c.opts.Load() {
			c.observe(o, s)
		}
		c.buildM.Lock()
		defer c.buildM.Unlock()
		for _, s := range c.extra {
			c.observe(o, s)
		}
		return nil
	}, insts...)
	return c
}

// observe reports s's counts (those not 0) at a collection.
func (c *Consumer) observe(o metric.Observer, s *measureOpts) {
	for k, in := range c.counted {
		if v := s.n[k].Load(); v != 0 && in != nil {
			o.ObserveInt64(in, v, s.obs...)
		}
	}
}

// Close unregisters the callback that reports the observed instruments
// (sqsonce.messages.in_flight and the counters bumped per message): a
// stopped consumer's metrics are no longer reported. It is safe to call
// more than once and on a nil *Consumer.
func (c *Consumer) Close() error {
	if c == nil {
		return nil
	}
	c.buildM.Lock()
	reg := c.reg
	c.reg = nil
	c.buildM.Unlock()
	if reg == nil {
		return nil
	}
	if err := reg.Unregister(); err != nil {
		return fmt.Errorf("telemetry: unregister the metrics callback: %w", err)
	}
	return nil
}

// outcomeNames are the outcomes whose settled sets (with no failure
// class) are built with the Consumer.
var outcomeNames = [...]string{"ack", "retry", "dead_letter", "duplicate", "release", "hold"}

// outcomeIndex returns outcome's index in outcomeNames, -1 for none.
func outcomeIndex(outcome string) int {
	switch outcome {
	case "ack":
		return 0
	case "retry":
		return 1
	case "dead_letter":
		return 2
	case "duplicate":
		return 3
	case "release":
		return 4
	case "hold":
		return 5
	}
	return -1
}

// systemAttrs are the attributes every consumer metric carries:
// messaging.system and, when queueURL is set, messaging.destination.name.
func systemAttrs(queueURL string) []attribute.KeyValue {
	kvs := []attribute.KeyValue{semconv.MessagingSystemAWSSQS}
	if queueURL != "" {
		kvs = append(kvs, semconv.MessagingDestinationName(queueName(queueURL)))
	}
	return kvs
}

// attrs returns the measurement options for c.system plus k1=v1 (and
// k2=v2 when k2 is set), building each distinct set once: the values are
// few (outcomes, classes, operations, results).
func (c *Consumer) attrs(k1, v1, k2, v2 string) *measureOpts {
	key := optKey{k1, v1, k2, v2}
	if o, ok := (*c.opts.Load())[key]; ok {
		return o
	}
	kvs := append(append(make([]attribute.KeyValue, 0, len(c.system)+2), c.system...), attribute.String(k1, v1))
	if k2 != "" {
		kvs = append(kvs, attribute.String(k2, v2))
	}
	return c.keep(key, newMeasureOpts(kvs...))
}

// keep adds o to the sets kept under key, unless maxOpts are kept, and
// returns the set kept under key (o when none is).
func (c *Consumer) keep(key optKey, o *measureOpts) *measureOpts {
	c.buildM.Lock()
	defer c.buildM.Unlock()
	old := *c.opts.Load()
	if have, ok := old[key]; ok {
		return have
	}
	if len(old) >= maxOpts {
		// Kept, under the lock, for its counts; beyond maxOpts more, the
		// counts go to one overflow set, as the SDK's cardinality limit
		// folds the sets of a synchronous counter.
		if have, ok := c.extra[key]; ok {
			return have
		}
		if len(c.extra) >= maxOpts {
			key, o = optKey{k1: "otel.metric.overflow"}, newMeasureOpts(append(append([]attribute.KeyValue{}, c.system...), attribute.Bool("otel.metric.overflow", true))...)
			if have, ok := c.extra[key]; ok {
				return have
			}
		}
		if c.extra == nil {
			c.extra = map[optKey]*measureOpts{}
		}
		c.extra[key] = o
		return o
	}
	m := make(map[optKey]*measureOpts, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = o
	c.opts.Store(&m)
	return o
}

// queueSpans returns the span name and start options of queueURL's
// process spans, built once per queue.
func (c *Consumer) queueSpans(queueURL string) *queueSpans {
	if queueURL == c.url && c.own != nil {
		return c.own
	}
	if q, ok := (*c.queues.Load())[queueURL]; ok {
		return q
	}
	name := queueName(queueURL)
	q := &queueSpans{
		name: "process " + name,
		start: []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				semconv.MessagingSystemAWSSQS,
				semconv.MessagingDestinationName(name),
				semconv.MessagingOperationTypeProcess,
				semconv.MessagingOperationName("process"),
			),
		},
		receive: "receive " + name,
		dest:    name,
	}
	for i := range q.receiveStart {
		q.receiveStart[i] = receiveStartOptions(name, i)
	}
	c.buildM.Lock()
	defer c.buildM.Unlock()
	old := *c.queues.Load()
	if have, ok := old[queueURL]; ok {
		return have
	}
	if len(old) >= maxOpts {
		return q
	}
	m := make(map[string]*queueSpans, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[queueURL] = q
	c.queues.Store(&m)
	return q
}

func queueName(url string) string { return url[strings.LastIndex(url, "/")+1:] }

// Receive records the span of a ReceiveMessage call on queueURL that
// started at start and returned msgs: "receive <queue>", kind client,
// with messaging.batch.message_count and a link to the trace context each
// message carries (see [MessageContext]), since one call brings messages
// of many traces; the links are built only when the span is recorded.
// The span is made once the call returned, with the call's start time,
// so that a call that brought nothing makes none: an empty long poll, or
// one cut short as ctx ended, has no message to link to, and an idle
// consumer would otherwise export a span per poll. A call that failed
// makes one, with the error.
func (c *Consumer) Receive(ctx context.Context, queueURL string, start time.Time, msgs []types.Message, err error) {
	if c == nil || c.tracer == nil || len(msgs) == 0 && (err == nil || ctx.Err() != nil) {
		return
	}
	q := c.queueSpans(queueURL)
	buf := receiveOpts.Get().(*[]trace.SpanStartOption)
	_, span := c.tracer.Start(ctx, q.receive, q.receiveOptions(buf, len(msgs), start)...)
	clear(*buf)
	receiveOpts.Put(buf)
	endReceive(span, msgs, err)
}

// endReceive ends a receive span with its links and error.
func endReceive(span trace.Span, msgs []types.Message, err error) {
	if span.IsRecording() {
		for i := range msgs {
			LinkMessage(span, msgs[i].MessageAttributes, msgs[i].Attributes, aws.ToString(msgs[i].MessageId))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// LinkMessage adds to span, when it is recorded, a link to the trace
// context a message carries (none when it carries none), with the
// message's ID.
func LinkMessage(span trace.Span, attrs map[string]types.MessageAttributeValue, sys map[string]string, messageID string) {
	if span == nil || !span.IsRecording() {
		return
	}
	if sc, ok := MessageContext(attrs, sys); ok {
		span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(messageID)}})
	}
}

// StartBatch begins the span over a batch of n messages processed
// together from the queue named queue ("" when they come from several
// queues): "process <queue>" (or "process"), kind consumer, with
// messaging.batch.message_count. Link each message with [LinkMessage]
// and end the span. It returns a nil span when tracing is off.
func (c *Consumer) StartBatch(ctx context.Context, queue string, n int) (context.Context, trace.Span) {
	if c == nil || c.tracer == nil {
		return ctx, nil
	}
	name := "process"
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemAWSSQS,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingBatchMessageCount(n),
	}
	if queue != "" {
		name = "process " + queue
		attrs = append(attrs, semconv.MessagingDestinationName(queue))
	}
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// Start begins the process span of a message received from queueURL,
// parented to the trace context it carries (its traceparent attribute,
// else its AWSTraceHeader system attribute, see [Extract]); key
// identifies the message in later calls. When ctx has a span of its own
// (a Lambda invocation's batch span) and the message carries a context,
// the process span links to ctx's span. The attributes known at creation
// (system, queue, operation) are the span's from its start; the
// message's own (ID, key, receive count) are added when it ends, and
// only if the sampler kept it.
func (c *Consumer) Start(ctx context.Context, key any, queueURL string, attrs map[string]types.MessageAttributeValue, sys map[string]string, messageID, dedupeKey string, receiveCount int) context.Context {
	if c == nil || c.tracer == nil {
		return ctx
	}
	q := c.queueSpans(queueURL)
	// The message's context, as MessageContext reads it, with one
	// context allocated; amb, ctx's own span, is linked when the message
	// carries a context of its own.
	parent, carried := ctx, false
	amb := trace.SpanContextFromContext(ctx)
	if _, ok := attrs["traceparent"]; ok {
		parent = Propagator.Extract(ctx, Carrier(attrs)) // ctx itself when not valid
		sc := trace.SpanContextFromContext(parent)
		carried = sc.IsValid() && !sc.Equal(amb)
	}
	if !carried {
		if h, ok := sys[AttrAWSTraceHeader]; ok {
			if sc, ok := ParseXRay(h); ok {
				parent, carried = trace.ContextWithRemoteSpanContext(ctx, sc), true
			}
		}
	}
	if !carried {
		amb = trace.SpanContext{}
	}
	ctx, span := c.tracer.Start(parent, q.name, q.start...)
	var old spanRec
	var ok bool
	if span.IsRecording() {
		if amb.IsValid() {
			span.AddLink(trace.Link{SpanContext: amb})
		}
		old, ok = c.spans.swap(key, spanRec{span: span, messageID: messageID, key: dedupeKey, receives: receiveCount})
	} else {
		old, ok = c.spans.take(key)
	}
	if ok {
		// The message ran before without being settled: a probe that found
		// its downstream still unavailable, held by the consumer for the
		// next probe. That run's span ends here.
		old.end("held", "", nil)
	}
	return ctx
}

// endAttrs holds the arrays of a span's per-message attributes between
// uses: SetAttributes copies what it is passed, and a variadic argument
// built at the call escaped, one allocation per message.
var endAttrs = sync.Pool{New: func() any { return new([5]attribute.KeyValue) }}

// end sets the span's per-message attributes and its outcome, in one
// call, and ends it.
func (r spanRec) end(outcome, class string, err error) {
	kvs := endAttrs.Get().(*[5]attribute.KeyValue)
	*kvs = [...]attribute.KeyValue{
		semconv.MessagingMessageID(r.messageID),
		attribute.String("sqsonce.key", r.key),
		attribute.Int("sqsonce.receive_count", r.receives),
		attribute.String("sqsonce.outcome", outcome),
		attribute.String("sqsonce.failure_class", class),
	}
	n := len(kvs)
	if class == "" {
		n--
	}
	r.span.SetAttributes(kvs[:n]...)
	*kvs = [5]attribute.KeyValue{}
	endAttrs.Put(kvs)
	switch outcome {
	case "ack", "duplicate", "release", "held":
	default:
		if err != nil {
			r.span.SetStatus(codes.Error, err.Error())
		}
	}
	r.span.End()
}

// Event adds a named event to the message's span.
func (c *Consumer) Event(key any, name string, err error) {
	if c == nil || c.tracer == nil {
		return
	}
	r, ok := c.spans.load(key)
	if !ok {
		return
	}
	if err != nil {
		r.span.AddEvent(name, trace.WithAttributes(attribute.String("error", err.Error())))
		return
	}
	r.span.AddEvent(name)
}

// Received counts one received message.
func (c *Consumer) Received(ctx context.Context) {
	if c == nil || !c.metrics {
		return
	}
	c.receive.count(cReceived, 1)
	c.inFlight.Add(1)
}

// HandlerDone records the time the handler took.
func (c *Consumer) HandlerDone(ctx context.Context, d time.Duration) {
	if c == nil || c.processDur == nil {
		return
	}
	c.processDur.Record(ctx, d.Seconds(), c.process.rec...)
}

// Settled counts the outcome and ends the message's span with it.
func (c *Consumer) Settled(ctx context.Context, key any, outcome, class string, err error) {
	if c == nil {
		return
	}
	if c.metrics {
		if i := outcomeIndex(outcome); i >= 0 && class == "" {
			c.outcomes[i].count(cSettled, 1)
		} else {
			c.attrs("sqsonce.outcome", outcome, "sqsonce.failure_class", class).count(cSettled, 1)
		}
		c.inFlight.Add(-1)
	}
	if c.tracer == nil {
		return
	}
	if r, ok := c.spans.take(key); ok {
		r.end(outcome, class, err)
	}
}

// DeadLettered counts a DLQ send by result (sent, failed: to be retried,
// refused: SQS will not take it) and records it on the span.
func (c *Consumer) DeadLettered(ctx context.Context, key any, result string, err error) {
	if c == nil {
		return
	}
	if c.deadLetters != nil {
		c.deadLetters.Add(ctx, 1, c.attrs("result", result, "", "").add...)
	}
	c.Event(key, "sqsonce.dead_letter."+result, err)
}

// LeaseLost counts a lost lease and records it on the span.
func (c *Consumer) LeaseLost(ctx context.Context, key any, err error) {
	if c == nil {
		return
	}
	if c.leaseLost != nil {
		c.leaseLost.Add(ctx, 1, c.base.add...)
	}
	c.Event(key, "sqsonce.lease_lost", err)
}

// SettleFailed counts a delete or visibility change that still failed
// after its retries.
func (c *Consumer) SettleFailed(ctx context.Context, op string) {
	if c == nil || c.settleFailed == nil {
		return
	}
	c.settleFailed.Add(ctx, 1, c.attrs("messaging.operation.name", op, "", "").add...)
}

// HeartbeatFailed counts failed extensions.
func (c *Consumer) HeartbeatFailed(ctx context.Context, n int) {
	if c == nil || c.hbFailed == nil {
		return
	}
	c.hbFailed.Add(ctx, int64(n), c.base.add...)
}

// Call records one SQS API call; received is the number of messages a
// ReceiveMessage returned (-1 for other operations).
func (c *Consumer) Call(ctx context.Context, op string, d time.Duration, err error, received int) {
	if c == nil || !c.metrics {
		return
	}
	o := c.callAttrs(op, "")
	dur := o
	if err != nil {
		dur = c.callAttrs(op, errorType(err))
	}
	o.count(cCalls, 1)
	c.callDur.Record(ctx, d.Seconds(), dur.rec...)
	if err != nil {
		o.count(cErrs, 1)
	}
	if op == "SendMessage" {
		dur.count(cSent, 1)
	}
	if received >= 0 && err == nil {
		c.batch.Record(ctx, int64(received), c.base.rec...)
	}
}

// maxAttrSets bounds the attribute sets kept (error.type values come
// from the server).
const maxAttrSets = 512

// callAttrs returns the measurement options of an SQS call: c.system,
// messaging.operation.name (the API's name), messaging.operation.type
// where the call is one of the messaging operations, and error.type
// when errType is set; each set built once.
func (c *Consumer) callAttrs(op, errType string) *measureOpts {
	key := optKey{"call", op, "error.type", errType}
	m := *c.opts.Load()
	if o, ok := m[key]; ok {
		return o
	}
	if errType != "" && errType != "_OTHER" && len(m) >= maxAttrSets {
		return c.callAttrs(op, "_OTHER")
	}
	kvs := append(append([]attribute.KeyValue{}, c.system...), semconv.MessagingOperationName(op))
	switch op {
	case "ReceiveMessage":
		kvs = append(kvs, semconv.MessagingOperationTypeReceive)
	case "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch":
		kvs = append(kvs, semconv.MessagingOperationTypeSettle)
	case "SendMessage", "SendMessageBatch":
		kvs = append(kvs, semconv.MessagingOperationTypeSend)
	}
	if errType != "" {
		kvs = append(kvs, semconv.ErrorTypeKey.String(errType))
	}
	return c.keep(key, newMeasureOpts(kvs...))
}

// errorType is a failed call's error.type: the AWS error code, else
// _OTHER.
func errorType(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() != "" {
		return ae.ErrorCode()
	}
	return "_OTHER"
}

// Paused counts a pause for an unavailable downstream; first says it
// starts an outage (the paused gauge goes to 1).
func (c *Consumer) Paused(ctx context.Context, reason string, first bool) {
	if c == nil || c.pauses == nil {
		return
	}
	c.pauses.Add(ctx, 1, c.attrs("sqsonce.pause.reason", reason, "", "").add...)
	if first {
		c.paused.Add(ctx, 1, c.base.add...)
	}
}

// Resumed records the end of an outage's pauses, d long.
func (c *Consumer) Resumed(ctx context.Context, d time.Duration) {
	if c == nil || c.paused == nil {
		return
	}
	c.paused.Add(ctx, -1, c.base.add...)
	c.pausedTime.Add(ctx, d.Seconds(), c.base.add...)
}

// maxDue bounds the not-before times a Consumer keeps for its next_due
// gauge: beyond it, a later time is not kept (the earliest are).
const maxDue = 10000

// Held counts a message held until notBefore (how: "visibility" or
// "resend"; key is its dedupe key) and records the gauge of the next
// time due.
func (c *Consumer) Held(ctx context.Context, key, how string, notBefore time.Time) {
	if c == nil || c.held == nil {
		return
	}
	c.held.Add(ctx, 1, c.attrs("sqsonce.hold", how, "", "").add...)
	c.dueMu.Lock()
	defer c.dueMu.Unlock()
	if c.due == nil {
		c.due = map[string]time.Time{}
	}
	now := time.Now()
	if _, ok := c.due[key]; !ok && len(c.due) >= maxDue {
		c.pruneDue(now)
		if len(c.due) >= maxDue {
			latest, t := c.latestDue()
			if !notBefore.Before(t) {
				c.recordDue(ctx, now)
				return
			}
			delete(c.due, latest)
		}
	}
	c.due[key] = notBefore
	if notBefore.Before(c.next) {
		c.next = notBefore
	}
	c.recordDue(ctx, now)
}

// HeldRan records that a message that carried a not-before time (key is
// its dedupe key) ran or otherwise settled: it is no longer held.
func (c *Consumer) HeldRan(ctx context.Context, key string) {
	if c == nil || c.held == nil {
		return
	}
	c.dueMu.Lock()
	defer c.dueMu.Unlock()
	t, ok := c.due[key]
	if !ok {
		return
	}
	delete(c.due, key)
	if t.Equal(c.next) {
		c.next = time.Time{}
	}
	c.recordDue(ctx, time.Now())
}

// recordDue records the earliest kept time still ahead of now, 0 for
// none: c.next, found again among the kept times (forgetting those past)
// when it is unknown or past (c.dueMu held).
func (c *Consumer) recordDue(ctx context.Context, now time.Time) {
	if !c.next.After(now) {
		c.pruneDue(now)
		c.next = time.Time{}
		for _, t := range c.due {
			if c.next.IsZero() || t.Before(c.next) {
				c.next = t
			}
		}
	}
	v := 0.0
	if !c.next.IsZero() {
		v = float64(c.next.UnixMilli()) / 1000
	}
	c.nextDue.Record(ctx, v, c.base.rec...)
}

// pruneDue forgets the times not after now (c.dueMu held).
func (c *Consumer) pruneDue(now time.Time) {
	for k, t := range c.due {
		if !t.After(now) {
			delete(c.due, k)
		}
	}
}

// latestDue returns the key and time of the latest kept time (c.dueMu
// held, c.due not empty).
func (c *Consumer) latestDue() (string, time.Time) {
	var key string
	var latest time.Time
	for k, t := range c.due {
		if key == "" || t.After(latest) {
			key, latest = k, t
		}
	}
	return key, latest
}
