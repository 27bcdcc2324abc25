package consumer

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// Config configures a [Consumer]. Only Client, QueueURL (or QueueName) and
// Handler are required.
type Config struct {
	// Client is the SQS client. Required.
	Client SQSAPI
	// QueueURL is the queue to consume. Either QueueURL or QueueName is
	// required.
	QueueURL string
	// QueueName is resolved to a URL with GetQueueUrl when QueueURL is
	// empty.
	QueueName string

	// Handler handles each message. Required.
	Handler Handler
	// Middleware wraps Handler, the first outermost. Panic recovery always
	// wraps the whole chain, its construction included. Defaults to none.
	Middleware []Middleware
	// Classifier maps your own errors to outcomes. It is asked first; an
	// error it has no opinion on (ok=false, or an invalid Outcome) gets the
	// consumer's classification, which uses Backoff and MaxAttempts:
	//
	//   - an error wrapping [ErrDuplicate] → duplicate (acked)
	//   - an error with a FailureClass() string method ([FailureClasser])
	//     → dead-letter with that class
	//   - [RetryError] ([RetryAfter]) → retry after its Delay
	//   - [PermanentError] ([Permanent]) → dead-letter, class "permanent"
	//   - any other error, a recovered panic included → retry after
	//     Backoff.Delay(attempt), attempt being [Message.Attempt]; from
	//     the MaxAttempts-th attempt (when MaxAttempts > 0) → dead-letter,
	//     class "max_attempts"
	//
	// So a Classifier answers only for the errors it knows; use
	// [ClassifierChain] to combine several. A panic in it is recovered,
	// logged, and counts as a transient failure (class "panic", or
	// "max_attempts" from the MaxAttempts-th receive). Defaults to nil: the
	// consumer's classification alone.
	Classifier Classifier
	// KeyFunc returns a message's dedupe key. Defaults to [DefaultKey] (the
	// sqsonce-id attribute, else the MessageId).
	KeyFunc KeyFunc

	// Concurrency is how many handlers run at once. Independent of the
	// receive batch size. Defaults to 10.
	Concurrency int
	// Prefetch is how many messages may wait, received but not started,
	// beyond Concurrency. The heartbeat keeps them invisible meanwhile. A
	// receiver asks for a full batch of 10 when 10 slots of
	// Concurrency+Prefetch are free, and for fewer only when a worker
	// would otherwise idle. Defaults to Concurrency, at most 10, raised
	// while the queue has a backlog and workers wait for receives
	// (receive-ahead) and lowered again when they do not. A consumer with
	// the default holds at most 2 × Concurrency messages (Concurrency + 10
	// when that is more). A Prefetch you set is fixed. Set [NoPrefetch]
	// for none: a receiver then asks only for messages a free worker can
	// start at once. On FIFO queues a message keeps its slot until its
	// delete or visibility change has returned. See "Prefetch" and
	// "Receive-ahead" in docs/architecture.md.
	Prefetch int
	// Receivers is how many goroutines long-poll SQS. Defaults to one per
	// 10 messages of capacity (Concurrency+Prefetch), between 1 and 8, and,
	// with the default Prefetch, one more per 10 slots receive-ahead may
	// add (at most 8 more), which poll only while it adds slots. With the
	// default, how many poll at once follows the queue: one on an idle
	// queue, all of them on a backlog (see docs/architecture.md). A
	// Receivers you set all poll, always.
	Receivers int
	// WaitTime is the long-poll wait (WaitTimeSeconds), 1s to 20s. Defaults
	// to 20s.
	WaitTime time.Duration
	// VisibilityTimeout is asked for on each receive and by each heartbeat
	// extension, whole seconds. Defaults to the queue's visibility timeout.
	VisibilityTimeout time.Duration
	// HeartbeatInterval is how often the heartbeat runs; it must be shorter
	// than the visibility timeout. Defaults to a third of the visibility
	// timeout.
	HeartbeatInterval time.Duration

	// Backoff is the retry policy for transient failures. Defaults to
	// Backoff{} (1s base, 15m cap, full jitter).
	Backoff Backoff
	// MaxAttempts dead-letters a message (class "max_attempts") whose
	// MaxAttempts-th attempt ([Message.Attempt]: its runs, not the FIFO
	// receives in which it waited behind its group and did not run) fails
	// transiently. Defaults to 0: no limit (the queue's RedrivePolicy
	// maxReceiveCount still applies; on a FIFO queue see "FIFO queues" in
	// docs/architecture.md for how it must allow for a group's depth).
	MaxAttempts int
	// DeadLetterQueueURL receives permanent failures. Defaults to the
	// queue's RedrivePolicy target. Run fails when neither is set.
	DeadLetterQueueURL string
	// DeadLetterSigningKey, when set, signs the failure record of every
	// dead letter (HMAC-SHA256; see deadletter.Failure.Sign). sqs-redrive
	// given the same key (--signing-key-env) then trusts the source queue a
	// signed record names, and so can move the messages of a DLQ that
	// several queues share back to the queue each failed on; a record a
	// producer wrote cannot be signed. At least 32 random bytes, kept like a
	// credential (never logged). Defaults to nil: records are not signed.
	DeadLetterSigningKey []byte

	// ShutdownTimeout is how long Run waits, after its context is
	// cancelled, for running handlers to finish before it cancels their
	// contexts (cause [ErrShutdown]) and releases their messages. Defaults
	// to 20s (under ECS's default 30s stopTimeout). Messages received but
	// not started are released once no receive call cut at shutdown can
	// still take them on the server: up to WaitTime after the drain
	// starts, within ShutdownTimeout when WaitTime is not longer (see
	// "Goroutines and who waits for them" in docs/architecture.md).
	ShutdownTimeout time.Duration
	// FlushInterval is the longest a delete or visibility change waits for
	// its batch to fill. Defaults to 50ms.
	FlushInterval time.Duration
	// ReceiveErrorGrace is how long receives may fail with only errors
	// that retrying cannot heal (the queue does not exist; access to it or
	// to its KMS key is denied; the key is disabled or gone; the
	// credentials are invalid or expired) before Run and Drain stop, as
	// when their context is cancelled, and return an error that names the
	// queue and SQS's error. A successful receive, or an error that heals
	// by itself (throttling, a server or network error), starts the count
	// again. Meanwhile every failed receive is logged (a warning; the stop
	// is an error), passed to Observer.ReceiveFailed, and makes
	// [Consumer.Ready] report it. Defaults to DefaultReceiveErrorGrace
	// (1m).
	ReceiveErrorGrace time.Duration

	// Logger receives the consumer's logs. Defaults to a no-op logger. At
	// debug level one line is written per settled message: message
	// [SettledMessage] ("settled") with fields message_id (the SQS
	// MessageId), key (the dedupe key, without namespace), outcome (ack,
	// duplicate, retry, dead_letter, release or hold), receive_count (an
	// integer) and duration (the handler's run time), plus delay, class
	// and error when they apply (and not_before and resent for a hold) (the error's text without the prefix of
	// [Permanent] or [RetryAfter], which the class or delay already says);
	// never the body. At warning level each dead letter is logged once
	// ("consumer: dead-lettered") with its class and reason (the error's
	// text, escaped and cut to 1 KiB; never the body). zap's sampling
	// (zap.NewProduction samples by level and message) would drop most of
	// these lines under load, so use a logger without sampling: build
	// zap.NewProductionConfig() with Sampling set to nil.
	Logger *zap.Logger
	// Observer receives metrics events. Defaults to [NopObserver].
	Observer Observer
	// TracerProvider, when set, gives every message a process span,
	// parented to the producer's trace context carried in the message's
	// traceparent/tracestate attributes (docs/observability.md lists the
	// spans and metrics). Defaults to nil: no spans, no cost.
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, records the consumer's metrics (messages
	// received, settled by outcome, in flight, handler duration, SQS calls
	// and errors, receive batch sizes, heartbeat failures, lost leases,
	// dead letters) and the autoscaling signal (see BacklogInterval).
	// Defaults to nil: no metrics, no cost.
	MeterProvider metric.MeterProvider
	// BacklogInterval is how often the consumer samples the autoscaling
	// signal it exports through MeterProvider (see "Autoscaling" in
	// docs/observability.md): the queue's ApproximateNumberOfMessages,
	// ApproximateNumberOfMessagesNotVisible and
	// ApproximateNumberOfMessagesDelayed, read with one GetQueueAttributes
	// call (so the role needs sqs:GetQueueAttributes, as start-up does),
	// and the share of Concurrency its handlers were busy since the last
	// sample. Each wait is the interval ± 10% at random, the first a random
	// part of it, so a fleet of workers does not call in lock-step. A failed
	// read is logged (a warning, then debug lines while it keeps failing)
	// and the backlog is left out of the metrics until a read succeeds;
	// receiving and handling are not affected. Nothing is sampled without a
	// MeterProvider. At least 1s; negative turns sampling off. Defaults to
	// 30s.
	BacklogInterval time.Duration
	// Payload reads bodies stored in S3 (AWS's extended client format) or
	// compressed before the handler runs (see [PayloadConfig]). Defaults
	// to no S3 client and a 64 MiB cap: compressed bodies are read, and a
	// message with an S3 pointer is dead-lettered with a reason that says
	// to set Payload.S3Client.
	Payload PayloadConfig
	// NowFunc returns the current time (failed_at of dead letters, and
	// whether a message with a not-before time is due). Defaults to
	// time.Now.
	NowFunc func() time.Time
	// HoldHop is for tests: it caps both how long a message received
	// before its not-before time ([AttrNotBefore]) is held by its
	// visibility and the delay of a copy re-sent to hold it, so that a
	// test sees a delay's hops in seconds. Whole seconds. Defaults to 0:
	// SQS's own limits, 12 hours of visibility from the receive and 15
	// minutes of delay.
	HoldHop time.Duration

	// receiveAhead is how many slots receive-ahead may add on top of
	// Prefetch (see capacity); set by withDefaults when Prefetch is left
	// at its default.
	receiveAhead int
	// aheadReceivers is how many receivers beyond Receivers run while
	// receive-ahead adds slots; set by withDefaults when both Prefetch and
	// Receivers are left at their defaults.
	aheadReceivers int
	// sampleRand draws the sampler's jitter, uniform in [0, 1); tests
	// set it. Defaults to math/rand.
	sampleRand func() float64
	// adaptReceivers: how many receivers poll at once follows the queue
	// (see pollers); set by withDefaults when Receivers is left at its
	// default.
	adaptReceivers bool
}

// NoPrefetch, as [Config.Prefetch], turns prefetch off.
const NoPrefetch = -1

// Defaults.
const (
	DefaultConcurrency     = 10
	DefaultWaitTime        = 20 * time.Second
	DefaultShutdownTimeout = 20 * time.Second
	DefaultFlushInterval   = 50 * time.Millisecond
	// DefaultReceiveErrorGrace is the default of
	// [Config.ReceiveErrorGrace]: long enough for an IAM or KMS change
	// still propagating, short enough that a worker whose queue is gone
	// says so within a minute or two.
	DefaultReceiveErrorGrace = time.Minute
	// DefaultBacklogInterval is the default of [Config.BacklogInterval].
	DefaultBacklogInterval = 30 * time.Second
)

// withDefaults fills zero values and checks what can be checked without
// calling SQS.
func (cfg Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("consumer: "+format, args...)) }
	if cfg.Client == nil {
		bad("Client is required: pass an *sqs.Client")
	}
	if cfg.QueueURL == "" && cfg.QueueName == "" {
		bad("QueueURL or QueueName is required")
	}
	if cfg.Handler == nil {
		bad("Handler is required")
	}
	if cfg.Concurrency < 0 || cfg.Prefetch < NoPrefetch || cfg.Receivers < 0 || cfg.MaxAttempts < 0 {
		bad("Concurrency (%d), Prefetch (%d), Receivers (%d) and MaxAttempts (%d) must not be negative (Prefetch may be NoPrefetch)",
			cfg.Concurrency, cfg.Prefetch, cfg.Receivers, cfg.MaxAttempts)
	}
	if err := checkPayload(cfg.Payload); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.DeadLetterSigningKey) > 0 {
		if err := deadletter.CheckSigningKey(cfg.DeadLetterSigningKey); err != nil {
			bad("DeadLetterSigningKey: %v", err)
		}
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	switch {
	case cfg.Prefetch == 0:
		cfg.Prefetch = min(max(cfg.Concurrency, 1), sqslimits.MaxBatchEntries)
		cfg.receiveAhead = max(cfg.Concurrency-cfg.Prefetch, 0)
	case cfg.Prefetch == NoPrefetch:
		cfg.Prefetch = 0
	}
	capacity := max(cfg.Concurrency, 1) + max(cfg.Prefetch, 0)
	if cfg.Receivers == 0 {
		cfg.Receivers = min(max((capacity+9)/10, 1), 8)
		// Receive-ahead's slots come with receivers of their own, which
		// poll only while it adds slots.
		cfg.aheadReceivers = min((cfg.receiveAhead+9)/10, 8)
		cfg.adaptReceivers = true
	}
	if cfg.Receivers > capacity {
		bad("Receivers (%d) is more than Concurrency+Prefetch (%d): each receiver needs a free slot", cfg.Receivers, capacity)
	}
	cfg.WaitTime = cmp.Or(cfg.WaitTime, DefaultWaitTime)
	if cfg.WaitTime < time.Second || cfg.WaitTime > sqslimits.MaxWaitTime || cfg.WaitTime%time.Second != 0 {
		bad("WaitTime %s must be whole seconds from 1s to 20s (SQS's long-poll limit)", cfg.WaitTime)
	}
	if cfg.VisibilityTimeout != 0 && (cfg.VisibilityTimeout < time.Second || cfg.VisibilityTimeout > sqslimits.MaxVisibility || cfg.VisibilityTimeout%time.Second != 0) {
		bad("VisibilityTimeout %s must be whole seconds from 1s to 12h", cfg.VisibilityTimeout)
	}
	if cfg.HeartbeatInterval < 0 {
		bad("HeartbeatInterval %s must not be negative", cfg.HeartbeatInterval)
	}
	if cfg.VisibilityTimeout > 0 && cfg.HeartbeatInterval >= cfg.VisibilityTimeout {
		bad("VisibilityTimeout (%s) must be longer than HeartbeatInterval (%s): raise the visibility timeout or shorten the interval", cfg.VisibilityTimeout, cfg.HeartbeatInterval)
	}
	if cfg.Backoff.Base < 0 || cfg.Backoff.Cap < 0 || (cfg.Backoff.Base > 0 && cfg.Backoff.Cap > 0 && cfg.Backoff.Cap < cfg.Backoff.Base) {
		bad("Backoff: Base (%s) and Cap (%s) must be positive with Cap ≥ Base", cfg.Backoff.Base, cfg.Backoff.Cap)
	}
	if cfg.HoldHop < 0 || cfg.HoldHop%time.Second != 0 {
		bad("HoldHop %s must be whole seconds (0 for SQS's limits)", cfg.HoldHop)
	}
	if cfg.ShutdownTimeout < 0 || cfg.FlushInterval < 0 {
		bad("ShutdownTimeout (%s) and FlushInterval (%s) must not be negative", cfg.ShutdownTimeout, cfg.FlushInterval)
	}
	if cfg.ReceiveErrorGrace < 0 {
		bad("ReceiveErrorGrace (%s) must not be negative: leave it 0 for the default (%s)", cfg.ReceiveErrorGrace, DefaultReceiveErrorGrace)
	}
	cfg.ReceiveErrorGrace = cmp.Or(cfg.ReceiveErrorGrace, DefaultReceiveErrorGrace)
	if cfg.BacklogInterval > 0 && cfg.BacklogInterval < time.Second {
		bad("BacklogInterval %s must be at least 1s (or negative to turn sampling off)", cfg.BacklogInterval)
	}
	cfg.BacklogInterval = cmp.Or(cfg.BacklogInterval, DefaultBacklogInterval)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.FlushInterval = cmp.Or(cfg.FlushInterval, DefaultFlushInterval)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Client != nil {
		cfg.Client = newPooledSQS(cfg.Client, cfg.calls())
	}
	return cfg, errors.Join(errs...)
}

// processing is the part of cfg the per-message path uses.
func (cfg Config) processing() pipeline.Config {
	return pipeline.Config{
		Handler:     cfg.Handler,
		Middleware:  cfg.Middleware,
		Classifier:  cfg.Classifier,
		Backoff:     cfg.Backoff,
		MaxAttempts: cfg.MaxAttempts,
		KeyFunc:     cfg.KeyFunc,
		Logger:      cfg.Logger,
		Observer:    cfg.Observer,
		Payload:     cfg.Payload,
		NowFunc:     cfg.NowFunc,
	}
}
