package sqslambda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/internal/telemetry"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// SQSAPI is the part of the SQS client the adapter uses. *sqs.Client
// satisfies it; tests pass fakes.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Defaults.
const (
	// DefaultDeadlineMargin is how long before the invocation deadline the
	// handlers' contexts end, leaving time to settle the batch.
	DefaultDeadlineMargin = 2 * time.Second
)

// Config configures a [Handler]. Only Client and Handler are required.
type Config struct {
	// Client makes the SQS calls: dead-letter sends, visibility changes for
	// retries, the heartbeat, and the queue look-ups. Required.
	Client SQSAPI
	// Handler handles one message. Required.
	Handler sqsmsg.Handler
	// Middleware wraps Handler, the first outermost (put the dedupe
	// middleware here). Panic recovery always wraps the whole chain.
	// Defaults to none.
	Middleware []sqsmsg.Middleware
	// Classifier is asked first; the errors it leaves undecided get the
	// consumer's classification with Backoff and MaxAttempts (see
	// consumer.Config.Classifier). Defaults to nil: that classification
	// alone.
	Classifier sqsmsg.Classifier
	// Backoff is the retry policy for transient failures. Defaults to
	// consumer.Backoff{} (1s base, 15m cap, full jitter).
	Backoff sqsmsg.Backoff
	// MaxAttempts dead-letters a message (class "max_attempts") when a
	// transient failure happens on its MaxAttempts-th receive. Defaults to
	// 0: no limit (the queue's RedrivePolicy maxReceiveCount still
	// applies).
	MaxAttempts int
	// KeyFunc sets each message's dedupe key. Defaults to nil:
	// consumer.DefaultKey (the sqsonce-id attribute, else the MessageId).
	KeyFunc sqsmsg.KeyFunc
	// QueueURL is the URL of the queue the function consumes. Defaults to
	// "": each record's eventSourceARN (arn:aws:sqs:REGION:ACCOUNT:NAME) is
	// turned into a URL with GetQueueUrl, once per queue. Set it to let
	// [Handler.Check] run at start-up, before the first invocation.
	QueueURL string
	// DeadLetterQueueURL is where permanent failures are sent. Defaults to
	// the dead-letter queue named by the source queue's RedrivePolicy (read
	// once per queue). A URL ending in .fifo is a FIFO queue.
	DeadLetterQueueURL string
	// DeadLetterSigningKey, when set, signs the failure record of every
	// dead letter (HMAC-SHA256; see deadletter.Failure.Sign). sqs-redrive
	// given the same key (--signing-key-env) then trusts the source queue a
	// signed record names, and so can move the messages of a DLQ that
	// several queues share back to the queue each failed on; a record a
	// producer wrote cannot be signed. At least 32 random bytes, kept like a
	// credential (never logged). Defaults to nil: records are not signed.
	DeadLetterSigningKey []byte
	// Concurrency is how many records of a batch run at once. On a FIFO
	// queue the records of one message group still run one at a time, in
	// order; different groups run in parallel. Defaults to 1.
	Concurrency int
	// DeadlineMargin is how long before the invocation's deadline the
	// handlers' contexts end (and with them the dedupe leases), leaving
	// time to settle the batch; records not started by then are reported
	// as failures without running. Defaults to DefaultDeadlineMargin (2s),
	// but never more than a quarter of the time the invocation has left.
	DeadlineMargin time.Duration
	// Visibility is the queue's visibility timeout, used by the heartbeat
	// that keeps the batch's messages invisible while records run.
	// Defaults to the queue's VisibilityTimeout attribute (read once).
	Visibility time.Duration
	// DisableHeartbeat turns the heartbeat off. Defaults to false: a batch
	// that runs longer than about a third of the visibility timeout has
	// its messages' visibility extended.
	DisableHeartbeat bool
	// FunctionTimeout is the function's configured timeout, compared with
	// the queue's visibility timeout by [Handler.Check]. Defaults to
	// AWS_LAMBDA_FUNCTION_TIMEOUT (seconds) when set, else the time left
	// at the first invocation.
	FunctionTimeout time.Duration
	// Logger logs panics, failed settles and the timeout check, and one
	// debug line per settled record (as consumer.Config.Logger describes;
	// build it without sampling to keep every line). Defaults to a no-op
	// logger.
	Logger *zap.Logger
	// Observer receives metrics events. Defaults to consumer.NopObserver.
	Observer sqsmsg.Observer
	// TracerProvider and MeterProvider, when set, give each record a
	// process span (parented to the producer's trace context in its
	// attributes) and record the consumer's metrics, as in a worker.
	// Default to nil: no spans, no metrics, no cost.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
	// HoldHop is for tests: it caps both how long a record received
	// before its not-before time (sqsmsg.AttrNotBefore) is held by its
	// visibility and the delay of a copy re-sent to hold it, as
	// consumer.Config.HoldHop does. Whole seconds. Defaults to 0: SQS's
	// own limits, 12 hours of visibility and 15 minutes of delay.
	HoldHop time.Duration
	// Payload reads bodies stored in S3 (AWS's extended client format) or
	// compressed before the handler runs, as in the consumer (see
	// consumer.PayloadConfig). DeleteAfterAck is not supported here: the
	// event source mapping deletes the message after the invocation
	// returns, so an S3 lifecycle rule removes the objects. Defaults to
	// no S3 client and a 64 MiB cap.
	Payload sqsmsg.PayloadConfig
}

// Handler adapts a sqsonce Handler (with its middleware, classifier and
// dedupe store) to an SQS event source mapping with partial batch
// responses. Pass its Handle method to lambda.Start. It is safe for
// concurrent use.
type Handler struct {
	cfg     Config
	client  SQSAPI
	log     *zap.Logger
	obs     sqsmsg.Observer
	now     func() time.Time
	process func(context.Context, *sqsmsg.Message) sqsmsg.Result
	tel     *telemetry.Consumer // nil when telemetry is off

	mu      sync.Mutex
	queues  map[string]*queue // by eventSourceARN
	timeout time.Duration     // the function timeout, when known
}

// New checks cfg and returns a Handler. It makes no call.
func New(cfg Config) (*Handler, error) {
	if cfg.Client == nil {
		return nil, errors.New("sqslambda: Config.Client is required")
	}
	if cfg.Handler == nil {
		return nil, errors.New("sqslambda: Config.Handler is required")
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("sqslambda: Config.Concurrency %d is negative", cfg.Concurrency)
	}
	if cfg.DeadlineMargin < 0 {
		return nil, fmt.Errorf("sqslambda: Config.DeadlineMargin %s is negative", cfg.DeadlineMargin)
	}
	if cfg.Visibility < 0 || cfg.Visibility > sqslimits.MaxVisibility {
		return nil, fmt.Errorf("sqslambda: Config.Visibility %s must be between 0 and 12h", cfg.Visibility)
	}
	if cfg.FunctionTimeout < 0 {
		return nil, fmt.Errorf("sqslambda: Config.FunctionTimeout %s is negative", cfg.FunctionTimeout)
	}
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("sqslambda: Config.MaxAttempts %d is negative", cfg.MaxAttempts)
	}
	if len(cfg.DeadLetterSigningKey) > 0 {
		if err := deadletter.CheckSigningKey(cfg.DeadLetterSigningKey); err != nil {
			return nil, fmt.Errorf("sqslambda: Config.DeadLetterSigningKey: %w", err)
		}
	}
	if cfg.Payload.DeleteAfterAck {
		return nil, errors.New("sqslambda: Config.Payload.DeleteAfterAck is not supported (the event source mapping deletes the message after the invocation): set an S3 lifecycle rule on the bucket instead")
	}
	if cfg.HoldHop < 0 || cfg.HoldHop%time.Second != 0 {
		return nil, fmt.Errorf("sqslambda: Config.HoldHop %s must be whole seconds (0 for SQS's limits)", cfg.HoldHop)
	}
	if cfg.Payload.MaxBytes < 0 {
		return nil, fmt.Errorf("sqslambda: Config.Payload.MaxBytes %d is negative", cfg.Payload.MaxBytes)
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 1)
	cfg.DeadlineMargin = cmp.Or(cfg.DeadlineMargin, DefaultDeadlineMargin)
	if cfg.FunctionTimeout == 0 {
		cfg.FunctionTimeout = timeoutFromEnv()
	}
	h := &Handler{
		cfg:     cfg,
		client:  cfg.Client,
		log:     cfg.Logger,
		obs:     cfg.Observer,
		now:     cfg.NowFunc,
		queues:  map[string]*queue{},
		timeout: cfg.FunctionTimeout,
	}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	if h.obs == nil {
		h.obs = sqsmsg.NopObserver{}
	}
	if h.now == nil {
		h.now = time.Now
	}
	// The record's path is configured as a worker's would be, with the
	// same telemetry (no queue name in the metrics: one function may
	// consume several queues).
	h.tel = telemetry.NewConsumer(cfg.TracerProvider, cfg.MeterProvider, "")
	pcfg := pipeline.Instrument(pipeline.Config{
		Handler:     cfg.Handler,
		Middleware:  cfg.Middleware,
		Classifier:  cfg.Classifier,
		Backoff:     cfg.Backoff,
		MaxAttempts: cfg.MaxAttempts,
		KeyFunc:     cfg.KeyFunc,
		Logger:      h.log,
		Observer:    h.obs,
		Payload:     cfg.Payload,
		NowFunc:     h.now,
	}, h.tel)
	// Every Observer call, here and in the path, recovers a panic in it.
	pcfg.Observer = pipeline.Guard(pcfg.Observer, h.log)
	h.obs = pcfg.Observer
	h.process = pipeline.New(pcfg).Process
	return h, nil
}

// record is one event record during an invocation.
type record struct {
	ev     *events.SQSMessage
	q      *queue
	url    string // "" when the queue URL could not be resolved
	msg    *sqsmsg.Message
	hb     *heartbeat.Heartbeat
	ctx    context.Context
	cancel context.CancelCauseFunc
	failed bool // reported in batchItemFailures
	// received is when the event source mapping received the record, as
	// far as is known: SQS's 12 hours count from then.
	received time.Time
}

// Errors recorded as the Result.Err of records that were not run.
var (
	// ErrGroupStopped: an earlier record of the same FIFO message group
	// failed in this batch, so this one was not run (to keep the order).
	ErrGroupStopped = errors.New("sqslambda: not run: an earlier message of its FIFO group failed in this batch")
	// ErrNoTimeLeft: the invocation's deadline (less DeadlineMargin) came
	// before the record could start.
	ErrNoTimeLeft = errors.New("sqslambda: not run: the invocation deadline is near")
	// ErrDownstreamUnavailable: an earlier record of the batch found its
	// downstream unavailable (consumer.Unavailable), so this one was not
	// run: it comes back after the same delay.
	ErrDownstreamUnavailable = errors.New("sqslambda: not run: another record of the batch found the downstream unavailable")
)

// Handle processes an SQS event and returns the records to retry as
// batchItemFailures. Every record runs through the same pipeline as in
// the long-poll consumer; then:
//
//   - ack and duplicate: success (Lambda deletes the message);
//   - retry: failure, with the message's visibility set to the delay;
//   - dead letter: sent to the DLQ with its failure, then success; when
//     the send fails it is retried instead (failure, visibility set to the
//     backoff delay): never lost;
//   - release, and records not run (a FIFO group stopped by an earlier
//     failure, or no time left): failure, visibility set to 0, or, behind
//     a retried record of their FIFO group, to that retry's delay;
//   - hold, a record received before its not-before time
//     (consumer.AttrNotBefore), not run: held as the consumer holds it
//     (settle.Hold), either reported as a failure with its visibility
//     set to the time left, or sent again as a fresh delayed copy and
//     reported as a success (Lambda deletes the record);
//   - unavailable (sqsmsg.Unavailable): a retry after its Retry-After
//     (else consumer.DefaultPause), never dead-lettered; the batch's
//     records not yet started are not run, and come back after the same
//     delay (the consumer would pause; a function cannot stop its event
//     source mapping).
//
// On a FIFO queue a message group's records run one at a time, in order;
// once one of them is retried or released, the group's later records in
// the batch are reported as failures without running (other groups go
// on), as the consumer does: behind a retry they are kept invisible for
// its delay, so the group comes back together, in order.
//
// Handle never returns an error: a failure to reach SQS is reported
// record by record, and no record is lost.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	start := h.now()
	// The invocation's batch span links to each record's trace context;
	// each record's process span is a child of its record's context (see
	// Start in internal/telemetry) and links back to the batch span.
	ctx, batchSpan := h.tel.StartBatch(ctx, batchQueue(ev.Records), len(ev.Records))
	if batchSpan != nil {
		defer batchSpan.End()
	}
	hctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		left := dl.Sub(start)
		h.learnTimeout(left)
		margin := min(h.cfg.DeadlineMargin, left/4)
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, dl.Add(-margin))
		defer cancel()
	}

	recs := make([]*record, len(ev.Records))
	byQueue := map[*queue][]*record{}
	var order []*queue
	for i := range ev.Records {
		r := &record{ev: &ev.Records[i]}
		r.q = h.queueFor(r.ev.EventSourceARN)
		if _, ok := byQueue[r.q]; !ok {
			order = append(order, r.q)
		}
		byQueue[r.q] = append(byQueue[r.q], r)
		recs[i] = r
	}

	hbCtx, stopHeartbeats := context.WithCancel(ctx)
	var hbWG sync.WaitGroup
	defer func() {
		stopHeartbeats()
		hbWG.Wait()
	}()
	for _, q := range order {
		url, err := h.resolveURL(ctx, q)
		if err != nil {
			h.log.Error("sqslambda: cannot resolve the source queue; its records are reported as failures",
				zap.String("event_source_arn", q.arn), zap.Error(err))
		}
		var hb *heartbeat.Heartbeat
		if url != "" {
			hb = h.prepare(ctx, q)
			if hb != nil {
				hbWG.Go(func() { _ = hb.Run(hbCtx) })
			}
		}
		for _, r := range byQueue[q] {
			r.url, r.hb = url, hb
			r.msg = toMessage(*r.ev, url, start)
			telemetry.LinkMessage(batchSpan, r.msg.Attributes, r.msg.SystemAttributes, r.msg.ID)
			r.ctx, r.cancel = context.WithCancelCause(hctx)
			h.obs.Received(r.msg)
			var dated bool
			r.received, dated = receivedAt(r.msg, start)
			switch {
			case hb == nil:
			case dated:
				// Extended at once if its visibility ends within two
				// intervals (a long batching window), else on the ticks.
				hb.Add(r.ev.ReceiptHandle, r.received, h.lostFunc(r))
			default:
				// Received again at a time SQS does not give: its
				// visibility may be about to end. Extended at once.
				hb.AddDue(r.ev.ReceiptHandle, r.received, h.lostFunc(r))
			}
		}
	}
	defer func() {
		for _, r := range recs {
			r.cancel(nil)
		}
	}()

	lanes := h.lanes(recs)
	work := make(chan []*record, len(lanes))
	for _, l := range lanes {
		work <- l
	}
	close(work)
	var down batchDown
	var wg sync.WaitGroup
	for range min(h.cfg.Concurrency, len(lanes)) {
		wg.Go(func() {
			for lane := range work {
				h.runLane(ctx, hctx, lane, &down)
			}
		})
	}
	wg.Wait()

	var resp events.SQSEventResponse
	for _, r := range recs {
		if r.failed {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.ev.MessageId})
		}
	}
	return resp, nil
}

// batchQueue is the name of the queue the records come from, "" when
// they come from several.
func batchQueue(recs []events.SQSMessage) string {
	if len(recs) == 0 {
		return ""
	}
	arn := recs[0].EventSourceARN
	for i := range recs {
		if recs[i].EventSourceARN != arn {
			return ""
		}
	}
	return arn[strings.LastIndex(arn, ":")+1:]
}

// lanes splits the records into units that run one record at a time:
// every record of a standard queue alone, every FIFO message group
// together in order.
func (h *Handler) lanes(recs []*record) [][]*record {
	type groupKey struct {
		q     *queue
		group string
	}
	var lanes [][]*record
	idx := map[groupKey]int{}
	for _, r := range recs {
		if !r.q.fifo || r.msg.GroupID == "" {
			lanes = append(lanes, []*record{r})
			continue
		}
		k := groupKey{r.q, r.msg.GroupID}
		i, ok := idx[k]
		if !ok {
			i = len(lanes)
			idx[k] = i
			lanes = append(lanes, nil)
		}
		lanes[i] = append(lanes[i], r)
	}
	return lanes
}

// batchDown is set, during an invocation, once a record found its
// downstream unavailable (settle.Unavailable): the delay it is retried
// after.
type batchDown struct {
	mu    sync.Mutex
	down  bool
	delay time.Duration
}

func (b *batchDown) set(delay time.Duration) {
	b.mu.Lock()
	b.down, b.delay = true, max(b.delay, delay)
	b.mu.Unlock()
}

func (b *batchDown) get() (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.delay, b.down
}

// runLane runs a lane's records in order. As in the consumer, once a
// record is retried or released (settle.StopsGroup), the lane's later
// records are not run: they are reported as failures and come back in
// order (settle.Behind). Once a record of the batch found its downstream
// unavailable, the records not yet started are not run either: the
// consumer would hold them while it pauses; an invocation cannot, so they
// come back after the same delay (settle.Unstarted).
func (h *Handler) runLane(ctx, hctx context.Context, lane []*record, down *batchDown) {
	stopped := false
	var stop sqsmsg.Result // the result that stopped the lane
	for _, r := range lane {
		var o sqsmsg.Outcome
		delay, unavailable := down.get()
		switch {
		case stopped:
			act := settle.Behind(stop.Outcome, stop.Delay, r.received, h.now())
			o = h.skipFor(ctx, r, ErrGroupStopped, act.Visibility)
		case unavailable:
			act := settle.Unstarted(delay, r.received, h.now())
			o = h.skipFor(ctx, r, ErrDownstreamUnavailable, act.Visibility)
		case r.url == "":
			o = h.skip(ctx, r, fmt.Errorf("sqslambda: not run: the URL of queue %s is unknown", r.q.arn))
		case hctx.Err() != nil:
			o = h.skip(ctx, r, fmt.Errorf("%w: %w", ErrNoTimeLeft, context.Cause(hctx)))
		case r.ctx.Err() != nil: // its visibility was lost while it waited
			o = h.skip(ctx, r, context.Cause(r.ctx))
		case r.hb != nil && !r.hb.Tracked(r.ev.ReceiptHandle):
			// Lost in the same heartbeat round as a record that ended
			// because of it, and its own lost callback has not run yet.
			o = h.skip(ctx, r, fmt.Errorf("%w: its visibility was lost before it started", sqsmsg.ErrLeaseLost))
		default:
			stop = h.run(ctx, r)
			o = stop.Outcome
			if settle.Unavailable(stop.Outcome, stop.Class) {
				down.set(stop.Delay)
			}
		}
		if settle.StopsGroup(o) {
			stopped = true
		}
	}
}

// run processes one record and settles it.
func (h *Handler) run(ctx context.Context, r *record) sqsmsg.Result {
	res := h.process(r.ctx, r.msg)
	if !h.leaveLost(r, &res) {
		h.settle(ctx, r, &res)
	}
	pipeline.LogSettled(h.log, r.msg, res)
	h.obs.Settled(r.msg, res)
	return res
}

// leaveLost leaves r alone when its visibility was lost while it ran and
// its outcome is not an ack (see settle.LeaveLost): visible again or with
// another consumer, it is reported as a failure (so that Lambda does not
// delete it) without a dead letter or a visibility change, and res
// becomes a release. It reports whether it did.
func (h *Handler) leaveLost(r *record, res *sqsmsg.Result) bool {
	if !settle.LeaveLost(res.Outcome) {
		return false
	}
	lost := h.lost(r)
	if lost == nil {
		return false
	}
	if r.hb != nil {
		r.hb.Remove(r.ev.ReceiptHandle)
	}
	r.failed = true
	*res = sqsmsg.Result{Outcome: sqsmsg.OutcomeRelease, Err: fmt.Errorf("%w; left alone (the handler returned: %w)", lost, res.Err), Duration: res.Duration}
	return true
}

// lost returns the cause, wrapping consumer.ErrLeaseLost, when r's
// visibility was lost: its context was cancelled for it, or the heartbeat
// no longer tracks its handle (found lost in a round whose callbacks have
// not all run yet).
func (h *Handler) lost(r *record) error {
	if cause := context.Cause(r.ctx); errors.Is(cause, sqsmsg.ErrLeaseLost) {
		return cause
	}
	if r.hb != nil && !r.hb.Tracked(r.ev.ReceiptHandle) {
		return fmt.Errorf("%w: its visibility was lost while it ran", sqsmsg.ErrLeaseLost)
	}
	return nil
}

// skip reports a record that was not run as a failure and makes it
// visible again at once.
func (h *Handler) skip(ctx context.Context, r *record, cause error) sqsmsg.Outcome {
	return h.skipFor(ctx, r, cause, 0)
}

// skipFor reports a record that was not run as a failure and makes it
// visible again after secs.
func (h *Handler) skipFor(ctx context.Context, r *record, cause error, secs int32) sqsmsg.Outcome {
	res := sqsmsg.Result{Outcome: sqsmsg.OutcomeRelease, Err: cause, Delay: time.Duration(secs) * time.Second}
	r.failed = true
	h.changeVisibility(ctx, r, secs)
	pipeline.LogSettled(h.log, r.msg, res)
	h.obs.Settled(r.msg, res)
	return res.Outcome
}

// settle applies res to r and records whether r is reported as a failure.
// ctx is the invocation's context (not cut short by DeadlineMargin).
//
// A record that succeeds (acked, duplicate, dead-lettered) stays under the
// heartbeat: Lambda deletes it only when the invocation returns, and until
// then it must not become visible again, however long the rest of the
// batch runs. A failure leaves the heartbeat before its visibility is set.
func (h *Handler) settle(ctx context.Context, r *record, res *sqsmsg.Result) {
	if res.Outcome == sqsmsg.OutcomeDeadLetter {
		dlq, err := h.deadLetter(ctx, r, *res)
		h.obs.DeadLettered(r.msg, err)
		if err != nil {
			// Not dead-lettered, so not deleted: retry it later instead, as
			// the consumer does.
			res.Outcome = sqsmsg.OutcomeRetry
			res.Err = fmt.Errorf("%w (dead-letter send failed: %v)", res.Err, err)
			var refused bool
			res.Delay, refused = settle.DeadLetterFailed(h.log, "sqslambda", settleMessage(r.msg), dlq, err, h.cfg.Backoff)
			if refused {
				h.obs.DeadLetterRefused(r.msg, err)
			}
		}
	}
	if res.Outcome == sqsmsg.OutcomeHold {
		h.hold(ctx, r, res)
		return
	}
	act := settle.Decide(res.Outcome, res.Delay, r.received, h.now())
	if act.Done {
		return
	}
	r.failed = true
	h.changeVisibility(ctx, r, act.Visibility)
}

// deadLetter sends r to the dead-letter queue and returns the queue's URL
// ("" when it could not be found).
func (h *Handler) deadLetter(ctx context.Context, r *record, res sqsmsg.Result) (string, error) {
	dlq, fifo, maxSize, err := h.deadLetterQueue(ctx, r.q)
	if err != nil {
		return "", err
	}
	return dlq, settle.Send(ctx, h.client, h.log, "sqslambda", settle.Letter{
		Msg: settleMessage(r.msg), Reason: res.Reason, Class: res.Class, Step: settle.Step(res.Err),
		SourceQueue: r.url, DLQ: dlq, FIFO: fifo, MaxSize: maxSize, Now: h.now(), SigningKey: h.cfg.DeadLetterSigningKey,
	})
}

// settleMessage is what a dead letter needs of m.
func settleMessage(m *sqsmsg.Message) settle.Message {
	return settle.Message{ID: m.ID, Body: m.WireBody(), Key: m.Key(), GroupID: m.GroupID, ReceiveCount: m.ReceiveCount, Attributes: m.Attributes}
}

// changeVisibility takes a record reported as a failure off the heartbeat
// and sets its visibility, once an extension of it in flight has returned
// (else that extension could land after, and undo, the change). When
// that fails the message keeps its current visibility: it comes back
// later than asked, never lost.
func (h *Handler) changeVisibility(ctx context.Context, r *record, secs int32) {
	if r.hb != nil {
		select {
		case <-r.hb.Detach(r.ev.ReceiptHandle):
		case <-ctx.Done():
		}
	}
	if r.url == "" || r.ev.ReceiptHandle == "" {
		return
	}
	_, err := h.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(r.url),
		ReceiptHandle:     aws.String(r.ev.ReceiptHandle),
		VisibilityTimeout: secs,
	}, sdkhttp.SQS)
	if err != nil {
		h.log.Warn("sqslambda: change visibility failed; the message comes back when its visibility timeout ends",
			zap.String("message_id", r.msg.ID), zap.Int32("visibility_seconds", secs), zap.Error(err))
	}
}

// lostFunc is called by the heartbeat when r's visibility could not be
// kept: r's handler context is cancelled.
func (h *Handler) lostFunc(r *record) func(error) {
	return func(err error) {
		cause := fmt.Errorf("%w: %w", sqsmsg.ErrLeaseLost, err)
		h.obs.LeaseLost(r.msg, cause)
		h.log.Warn("sqslambda: visibility lost while the handler runs; cancelling it",
			zap.String("message_id", r.msg.ID), zap.Error(err))
		r.cancel(cause)
	}
}

// prepare reads the queue's attributes once, runs the timeout check on
// the first invocation that can, and returns a heartbeat for this
// invocation (nil when off or when the visibility timeout is unknown).
func (h *Handler) prepare(ctx context.Context, q *queue) *heartbeat.Heartbeat {
	if err := h.readAttributes(ctx, q); err != nil {
		h.log.Warn("sqslambda: cannot read the queue's attributes (no heartbeat, no timeout check this time)",
			zap.String("queue_url", q.url), zap.Error(err))
	}
	h.checkQueue(q)
	if h.cfg.DisableHeartbeat {
		return nil
	}
	q.mu.Lock()
	vis := cmp.Or(h.cfg.Visibility, q.visibility)
	q.mu.Unlock()
	if vis < time.Second {
		return nil
	}
	hb, err := heartbeat.New(heartbeat.Config{
		Client:     h.client,
		QueueURL:   q.url,
		Visibility: vis.Truncate(time.Second),
		Logger:     h.log,
		OnFailure:  h.obs.HeartbeatFailed,
		NowFunc:    h.now,
	})
	if err != nil {
		h.log.Warn("sqslambda: heartbeat off", zap.Error(err))
		return nil
	}
	return hb
}

// receivedAt estimates when the event source mapping received msg, and
// reports whether that is known. On a first receive it is
// ApproximateFirstReceiveTimestamp (a stamp after now, from a clock a
// little ahead, is taken as now). A message received again carries only
// its first receive's time: its last receive, when its visibility began,
// is somewhere before now, and now is returned with false (now bounds
// the visibility's end from above, and SQS's 12 hours are counted from
// it); so is a first receive without the stamp.
func receivedAt(msg *sqsmsg.Message, now time.Time) (time.Time, bool) {
	if msg.ReceiveCount == 1 {
		if t, ok := systemTime(msg, "ApproximateFirstReceiveTimestamp"); ok {
			if t.After(now) {
				t = now
			}
			return t, true
		}
	}
	return now, false
}

// hold settles r, received before its not-before time (res is the
// pipeline's OutcomeHold), as the consumer does (settle.Hold): a batch
// item failure with its visibility set to the time left, or a fresh
// copy sent and r reported as a success, so that the event source mapping
// deletes it. A copy that cannot be sent is held by its visibility
// instead. res records what was done.
func (h *Handler) hold(ctx context.Context, r *record, res *sqsmsg.Result) {
	r.q.mu.Lock()
	maxReceives := settle.MaxReceiveCount(r.q.redrive)
	r.q.mu.Unlock()
	now := h.now()
	act := settle.Hold(res.NotBefore, r.msg.ReceiveCount, maxReceives, h.cfg.HoldHop, r.received, now)
	if act.Resend {
		err := settle.Resend(ctx, h.client, settle.Copy{
			QueueURL: r.url, Body: r.ev.Body, Attributes: r.msg.Raw.MessageAttributes,
			MessageID: r.ev.MessageId, SentAt: r.msg.SentAt, Delay: act.Seconds,
		})
		if err == nil {
			res.Resent, res.Delay = true, time.Duration(act.Seconds)*time.Second
			return
		}
		act.Seconds = settle.HoldFallback(res.NotBefore, h.cfg.HoldHop, r.received, now)
		res.Err = err
		h.log.Warn("sqslambda: re-sending a held message failed; it is held by its visibility instead",
			zap.String("message_id", r.msg.ID), zap.Time("not_before", res.NotBefore),
			zap.Int32("visibility_seconds", act.Seconds), zap.Error(err))
	}
	res.Delay = time.Duration(act.Seconds) * time.Second
	r.failed = true
	h.changeVisibility(ctx, r, act.Seconds)
}
