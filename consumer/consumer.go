package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/msgstate"
	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqserr"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// Consumer long-polls one SQS queue and runs a Handler for each message.
// Create it with [New]; start it with [Consumer.Run].
type Consumer struct {
	cfg     Config
	running atomic.Bool
	health  *health // what Ready reports

	// tel is the instrumentation of the queue at telURL (nil: telemetry
	// off), kept across Runs (see telemetry).
	tel    *telemetry.Consumer
	telURL string
}

// telemetry returns the instrumentation of the queue at url for a Run
// (nil when neither provider is set). It is kept across Runs: the counts
// go on from one Run to the next, stay observable after Run returns (a
// MeterProvider's last collection at shutdown reads them), and the
// collection callback is registered once per Consumer, where a new one
// per Run left the earlier ones registered. One of another queue (its URL
// changed) is closed first.
func (c *Consumer) telemetry(url string) *telemetry.Consumer {
	if c.tel != nil && c.telURL == url {
		return c.tel
	}
	if err := c.tel.Close(); err != nil {
		c.cfg.Logger.Warn("consumer: stop reporting the metrics of the previous queue", zap.String("queue_url", c.telURL), zap.Error(err))
	}
	c.tel, c.telURL = telemetry.NewConsumer(c.cfg.TracerProvider, c.cfg.MeterProvider, url), url
	return c.tel
}

// New checks cfg, fills its defaults and returns a Consumer. Checks that
// need SQS (the queue and its dead-letter queue exist, their kinds match,
// the visibility timeout is longer than the heartbeat interval) run at the
// start of Run, before any message is received.
func New(cfg Config) (*Consumer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, health: &health{}}, nil
}

// queueInfo is what Run learns about the queues before receiving.
type queueInfo struct {
	url        string
	fifo       bool
	visibility time.Duration
	dlqURL     string
	// dlqMaxSize is the dead-letter queue's MaximumMessageSize; 0 when
	// not known.
	dlqMaxSize int
	// maxReceives is the queue's RedrivePolicy maxReceiveCount; 0 for
	// none.
	maxReceives int
}

// Validate makes the start-up checks Run makes (the queue exists, the
// dead-letter queue exists and is of the same kind, the visibility timeout
// is longer than the heartbeat interval) without receiving anything.
func (c *Consumer) Validate(ctx context.Context) error {
	_, err := c.setup(ctx)
	return err
}

func (c *Consumer) setup(ctx context.Context) (queueInfo, error) {
	cfg := c.cfg
	q := queueInfo{url: cfg.QueueURL}
	if q.url == "" {
		out, err := cfg.Client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(cfg.QueueName)})
		if err != nil {
			if isQueueMissing(err) {
				return q, fmt.Errorf("consumer: queue %q does not exist: create it or fix QueueName: %w", cfg.QueueName, err)
			}
			return q, fmt.Errorf("consumer: get queue URL of %q: %w", cfg.QueueName, err)
		}
		q.url = aws.ToString(out.QueueUrl)
	}
	out, err := cfg.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q.url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameVisibilityTimeout,
			types.QueueAttributeNameFifoQueue,
			types.QueueAttributeNameRedrivePolicy,
			types.QueueAttributeNameMaximumMessageSize,
		},
	})
	if err != nil {
		if isQueueMissing(err) {
			return q, fmt.Errorf("consumer: queue %s does not exist: create it or fix QueueURL: %w", q.url, err)
		}
		return q, fmt.Errorf("consumer: read attributes of queue %s: %w", q.url, err)
	}
	attrs := out.Attributes
	q.fifo = attrs[string(types.QueueAttributeNameFifoQueue)] == "true" || strings.HasSuffix(q.url, ".fifo")
	q.maxReceives = settle.MaxReceiveCount(attrs[string(types.QueueAttributeNameRedrivePolicy)])
	q.visibility = cfg.VisibilityTimeout
	if q.visibility == 0 {
		secs, err := strconv.Atoi(attrs[string(types.QueueAttributeNameVisibilityTimeout)])
		if err != nil {
			return q, fmt.Errorf("consumer: queue %s reports no usable VisibilityTimeout (%q): set Config.VisibilityTimeout", q.url, attrs[string(types.QueueAttributeNameVisibilityTimeout)])
		}
		q.visibility = time.Duration(secs) * time.Second
	}
	interval := c.heartbeatInterval(q.visibility)
	if q.visibility < time.Second || interval >= q.visibility {
		return q, fmt.Errorf("consumer: the visibility timeout (%s) must be longer than the heartbeat interval (%s): raise the queue's VisibilityTimeout (or Config.VisibilityTimeout) or shorten HeartbeatInterval", q.visibility, interval)
	}

	q.dlqURL = cfg.DeadLetterQueueURL
	if q.dlqURL == "" {
		url, _, err := settle.DeadLetterQueue(ctx, cfg.Client, "consumer", attrs[string(types.QueueAttributeNameRedrivePolicy)])
		if err != nil {
			return q, err
		}
		if url == "" {
			return q, fmt.Errorf("consumer: queue %s has no dead-letter queue: set Config.DeadLetterQueueURL or give the queue a RedrivePolicy", q.url)
		}
		q.dlqURL = url
	}
	dout, err := cfg.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.dlqURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameFifoQueue, types.QueueAttributeNameMaximumMessageSize},
	})
	if err != nil {
		if isQueueMissing(err) {
			return q, fmt.Errorf("consumer: dead-letter queue %s does not exist: create it or fix DeadLetterQueueURL / the RedrivePolicy: %w", q.dlqURL, err)
		}
		return q, fmt.Errorf("consumer: read attributes of dead-letter queue %s: %w", q.dlqURL, err)
	}
	dlqFIFO := dout.Attributes[string(types.QueueAttributeNameFifoQueue)] == "true" || strings.HasSuffix(q.dlqURL, ".fifo")
	if dlqFIFO != q.fifo {
		return q, fmt.Errorf("consumer: queue %s is %s but its dead-letter queue %s is %s: SQS needs both of the same kind", q.url, kind(q.fifo), q.dlqURL, kind(dlqFIFO))
	}
	q.dlqMaxSize, _ = strconv.Atoi(dout.Attributes[string(types.QueueAttributeNameMaximumMessageSize)])
	if srcMax, _ := strconv.Atoi(attrs[string(types.QueueAttributeNameMaximumMessageSize)]); q.dlqMaxSize > 0 && srcMax > q.dlqMaxSize {
		cfg.Logger.Warn("consumer: the dead-letter queue's MaximumMessageSize is smaller than the queue's: a large message may not fit in it, and is then left to the queue's maxReceiveCount; raise the dead-letter queue's MaximumMessageSize",
			zap.String("queue_url", q.url), zap.String("dlq_url", q.dlqURL),
			zap.Int("queue_max_message_size", srcMax), zap.Int("dlq_max_message_size", q.dlqMaxSize))
	}
	return q, nil
}

func kind(fifo bool) string {
	if fifo {
		return "FIFO"
	}
	return "standard"
}

func (c *Consumer) heartbeatInterval(visibility time.Duration) time.Duration {
	if c.cfg.HeartbeatInterval > 0 {
		return c.cfg.HeartbeatInterval
	}
	return visibility / 3
}

// Run validates the queues, then receives and handles messages until ctx
// is cancelled, then drains, mirroring http.Server.Shutdown: it stops
// receiving (cancelling long polls), releases received messages that have
// not started (visibility 0), keeps heartbeating running handlers until they
// finish or ShutdownTimeout passes, then cancels their contexts with cause
// [ErrShutdown] and releases their messages, flushes every pending delete
// and visibility change, and returns.
//
// Receives that keep failing with an error retrying cannot heal (the
// queue was deleted, access to it was revoked) for ReceiveErrorGrace
// stop Run as a cancelled context does: it drains, then returns an error
// that names the queue and SQS's error (see [Config.ReceiveErrorGrace]).
//
// Run returns nil after a drain in which every handler finished in time,
// an error wrapping context.DeadlineExceeded when handlers had to be
// cancelled at ShutdownTimeout, a start-up error (before any message is
// received) when the configuration is wrong, and the receive error once
// ReceiveErrorGrace passed. A Consumer runs at most once at a time.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("consumer: Run called while already running")
	}
	defer c.running.Store(false)
	q, err := c.setup(ctx)
	if err != nil {
		return err
	}
	s := newSampler(c.cfg, q.url)
	r, err := newRunner(s.instrument(c.cfg), q, c.telemetry(q.url))
	if err != nil {
		return err
	}
	r.health = c.health
	if r.health == nil {
		r.health = &health{}
	}
	// The autoscaling sampler (load.go) runs beside r until ctx ends or r
	// returns on its own (receives that cannot heal), whichever is first.
	sctx, stop := context.WithCancel(ctx)
	wait := s.start(sctx, r.cfg.Client, r.log)
	defer wait()
	defer stop()
	return r.run(ctx)
}

// runner is the state of one Run.
type runner struct {
	// epoch is when the run was set up: a message's receive is kept as
	// the time since (inflight.recvAt), which is smaller than a
	// time.Time.
	epoch    time.Time
	cfg      Config
	q        queueInfo
	log      *zap.Logger
	obs      Observer
	pipeline *pipeline.Processor
	hb       *heartbeat.Heartbeat
	batcher  *batcher
	// gate holds received messages back while the consumer is paused
	// (BackPressure): the workers ask it before starting one, the
	// receivers before receiving.
	gate *gate
	// limits holds a message back while a limit is reached (Limits): the
	// workers ask it after the gate; nil without limits. limitWG waits
	// for its fleet poller; runCtx is Run's context (done at the drain).
	limits  *limiter
	limitWG sync.WaitGroup
	runCtx  context.Context

	capacity *capacity
	// pollers bounds the receive calls at once (nil when Receivers was
	// set: every receiver polls).
	pollers *pollers
	// slotDone frees a capacity slot once a message's settle call returned
	// (FIFO queues: until then the message still holds its group, so
	// receiving in its place would only find locked groups). Nil on
	// standard queues, where the slot is freed when the settle is queued.
	slotDone func()
	// freed counts the slots slotDone freed that batchDone has not yet
	// handed back to capacity.
	freed atomic.Int64
	// unsettled counts messages received and not yet queued to the
	// batcher (see queued).
	unsettled atomic.Int64
	queue     chan *inflight  // standard queues: received messages for the Concurrency workers
	ready     chan *lane      // FIFO queues: lanes with a message to run, for the Concurrency workers
	stopping  <-chan struct{} // Run's ctx.Done(): closed when the drain starts
	// polls is the receivers' client; recvDone is closed once the
	// receivers have returned, and drainDeadline is set before, to the
	// drain's start plus ShutdownTimeout (see awaitPolls).
	polls         *pollWatch
	recvDone      chan struct{}
	drainDeadline time.Time
	// workBase is Run's context without its cancellation: the handlers'
	// contexts derive from it, each cancelled on its own (see
	// stopHandlers), so that making one locks nothing shared.
	workBase context.Context
	// running holds each worker's running message, for stopHandlers;
	// handlersStopped is set once it ran.
	running         []atomic.Pointer[inflight]
	handlersStopped atomic.Bool
	workWG          sync.WaitGroup

	// health is what Consumer.Ready reports.
	health *health
	// stopRun stops the Run as its context's cancellation would: called
	// once, by failRun, which sets fatal, the error Run then returns.
	stopRun context.CancelCauseFunc
	failOne sync.Once
	fatal   error

	mu sync.Mutex
	// beating holds the running messages whose handlers registered a
	// Message.OnHeartbeat function (see watch).
	beating map[*inflight]struct{}
	lanes   map[string]*lane
	spare   []*lane // lanes to reuse (dispatch)

	// unrun counts the receives that were not attempts: those in which
	// FIFO messages did not run, and those whose downstream was
	// unavailable (see Message.Attempt).
	unrun *settle.Unrun
}

// inflight is one received, not yet settled message.
type inflight struct {
	r      *runner
	msg    *Message
	recvAt time.Duration // when its receive call started, since r.epoch (see recvStart)

	// lastBehind is set, on a FIFO queue, when a message waiting behind
	// this one in its lane is at its last receive (settle.AtReceiveLimit):
	// put back, SQS would move it to the DLQ without it having run. Set
	// under r.mu when the message becomes its lane's head (pop).
	lastBehind bool

	// lim is its key limit (Limits.KeyLimitFunc), found when a worker
	// first takes it; nil without Limits. It points into the message's
	// own allocation (limitedMessage), so that a consumer without Limits
	// allocates no room for it.
	lim *msgLimit

	mu     sync.Mutex
	cancel context.CancelCauseFunc // set while the handler runs
	lost   error                   // set when the lease was lost
}

// recvStart is when the receive call that brought the message started:
// its visibility runs from then. (Monotonic: epoch carries its clock
// reading, and Add keeps it.)
func (m *inflight) recvStart() time.Time { return m.r.epoch.Add(m.recvAt) }

// handle is the message's receipt handle, kept in its Message's Raw.
func (m *inflight) handle() string { return aws.ToString(m.msg.Raw.ReceiptHandle) }

// receivedMessage is a received message's record and its Message,
// allocated together: inflight.msg points into it.
type receivedMessage struct {
	rec inflight
	msg Message
}

// limitedMessage is a receivedMessage with room for its key limit, for
// a consumer with Limits: inflight.lim points to lim.
type limitedMessage struct {
	receivedMessage
	lim msgLimit
}

// newReceived allocates a received message's record and Message, with
// room for its key limit when limits are set.
func newReceived(limits bool) *receivedMessage {
	if !limits {
		return new(receivedMessage)
	}
	lm := new(limitedMessage)
	lm.rec.lim = &lm.lim
	return &lm.receivedMessage
}

// lane is one FIFO group's received messages, run in order. It is active
// while it sits in the ready queue or a worker runs one of its messages:
// then no other worker may take it.
type lane struct {
	group string
	// head is the message a worker runs next: taken off queue, under r.mu,
	// when the lane is put in the ready queue, so that the worker that
	// takes the lane needs no lock to start it.
	head   *inflight
	queue  []*inflight
	active bool
}

func newRunner(cfg Config, q queueInfo, tel *telemetry.Consumer) (*runner, error) {
	cfg = instrument(cfg, tel)
	cfg.Observer = pipeline.Guard(cfg.Observer, cfg.Logger)
	// The most messages received and not settled: held ones (Limits) may
	// lend their slots to receives.
	most := cfg.Concurrency + cfg.Prefetch + cfg.receiveAhead
	if cfg.Limits.KeyLimitFunc != nil {
		most += cfg.Limits.MaxHeld
	}
	r := &runner{
		epoch:    time.Now(),
		cfg:      cfg,
		q:        q,
		log:      cfg.Logger.With(zap.String("queue_url", q.url)),
		obs:      cfg.Observer,
		capacity: newCapacity(cfg.Concurrency, cfg.Prefetch, cfg.receiveAhead),
		queue:    make(chan *inflight, most),
		ready:    make(chan *lane, most),
		beating:  map[*inflight]struct{}{},
		lanes:    map[string]*lane{},
		unrun:    new(settle.Unrun),
	}
	r.gate = newGate(cfg.BackPressure, r.log, cfg.Observer, r.unsettled.Load)
	if cfg.Limits.on() {
		var err error
		if r.limits, err = newLimiter(r, cfg.Limits); err != nil {
			return nil, err
		}
	}
	if q.fifo {
		// Slots come back a batch at a time: freed one by one, a waiting
		// receiver would take the first few (when the workers idle) and
		// ask for that many, a short receive, each a call.
		r.slotDone = func() { r.freed.Add(1) }
	}
	if cfg.adaptReceivers {
		r.pollers = newPollers(cfg.Receivers+cfg.aheadReceivers, cfg.WaitTime, q.fifo)
	}
	r.polls = &pollWatch{SQSAPI: cfg.Client}
	r.cfg.Client = r.polls
	r.recvDone = make(chan struct{})
	pcfg := cfg.processing()
	pcfg.Logger = r.log
	r.pipeline = pipeline.New(pcfg)
	hb, err := heartbeat.New(heartbeat.Config{
		Client:     cfg.Client,
		QueueURL:   q.url,
		Visibility: q.visibility,
		Interval:   orDefault(cfg.HeartbeatInterval, q.visibility/3),
		// A hung extension is given up as a hung settle call is.
		CallTimeout: min(orDefault(cfg.HeartbeatInterval, q.visibility/3), settleCallTimeout),
		OnTick:      r.beatHandlers,
		OnFailure:   cfg.Observer.HeartbeatFailed,
		Logger:      r.log,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	r.hb = hb
	r.batcher = newBatcher(cfg.Client, q.url, cfg.FlushInterval, cfg.batchSenders(), r.log)
	r.batcher.obs = cfg.Observer
	r.batcher.hold = hb
	if cfg.Payload.DeleteAfterAck {
		r.batcher.objects = cfg.Payload.S3Client
	}
	if q.fifo {
		// A FIFO message blocks its group until deleted: once every
		// received message is queued, send what is queued without waiting
		// for full batches.
		r.batcher.idle = func() bool { return r.unsettled.Load() == 0 }
		r.batcher.batchDone = func() {
			if n := r.freed.Swap(0); n > 0 {
				r.capacity.release(int(n))
			}
		}
	}
	return r, nil
}

// orDefault returns d when positive, else def.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (r *runner) run(ctx context.Context) error {
	ctx, r.stopRun = context.WithCancelCause(ctx)
	defer r.stopRun(nil)
	r.stopping = ctx.Done()
	r.runCtx = ctx
	r.health.start(r.q.url)
	defer r.health.set(stopped)
	bg := context.WithoutCancel(ctx)
	r.workBase = bg
	r.running = make([]atomic.Pointer[inflight], r.cfg.Concurrency)
	hbCtx, stopHB := context.WithCancel(bg)
	defer stopHB()

	var hbWG, settleWG, recvWG sync.WaitGroup
	settleWG.Go(r.batcher.run)
	hbWG.Go(func() { _ = r.hb.Run(hbCtx) })
	if r.limits != nil && r.limits.slots != nil {
		r.limitWG.Go(func() { r.limits.poll(ctx) })
	}
	for i := range r.cfg.Concurrency {
		if r.q.fifo {
			r.workWG.Go(func() { r.workLanes(i) })
		} else {
			r.workWG.Go(func() { r.work(i) })
		}
	}
	// Receive calls run under their own context: at shutdown a call in
	// flight gets receiveGrace to return, so the messages SQS already
	// handed out are released rather than left invisible until their
	// visibility timeout (a cancelled call loses its response).
	callCtx, cancelCalls := context.WithCancel(bg)
	defer cancelCalls()
	for i := range r.cfg.Receivers + r.cfg.aheadReceivers {
		recvWG.Go(func() { r.receive(ctx, callCtx, i, i >= r.cfg.Receivers) })
	}
	r.log.Info("consumer started", zap.Bool("fifo", r.q.fifo), zap.Int("concurrency", r.cfg.Concurrency),
		zap.Int("receivers", r.cfg.Receivers), zap.Duration("visibility", r.q.visibility))

	<-ctx.Done()
	r.health.set(draining)
	r.drainDeadline = time.Now().Add(r.cfg.ShutdownTimeout)
	r.log.Info("consumer draining", zap.Duration("shutdown_timeout", r.cfg.ShutdownTimeout))
	grace := time.AfterFunc(receiveGrace, cancelCalls)
	recvWG.Wait()
	grace.Stop()
	close(r.recvDone)
	if r.limits != nil {
		// Messages held back by a key's limit are released with those
		// waiting for a worker; a slot freed after is not handed on.
		r.limitWG.Wait()
		for _, m := range r.limits.close() {
			r.releaseUnstarted(m)
		}
	}
	// Messages waiting for a worker, and FIFO messages waiting behind a
	// running handler of their group, are released now, not when a
	// handler finishes: as soon as no receive call cut short above can
	// take them on the server (awaitPolls).
	if !r.q.fifo {
		takeWaiting(r.queue, r.releaseUnstarted)
		close(r.queue) // the workers return once their handlers have
	} else {
		// Lanes still in the ready queue hold a message no worker took.
		takeWaiting(r.ready, func(l *lane) { r.releaseUnstarted(l.head) })
	}
	r.mu.Lock()
	lanes := make([]*lane, 0, len(r.lanes))
	for _, l := range r.lanes {
		lanes = append(lanes, l)
	}
	r.mu.Unlock()
	if len(lanes) > 0 {
		r.awaitPolls()
	}
	for _, l := range lanes {
		r.releaseLane(l, nil)
	}
	if r.q.fifo {
		// Nothing can be queued in a lane any more: the workers return
		// once the lanes they run are done.
		close(r.ready)
	}

	workDone := make(chan struct{})
	go func() { r.workWG.Wait(); close(workDone) }()
	var runErr error
	timer := time.NewTimer(time.Until(r.drainDeadline))
	select {
	case <-workDone:
		timer.Stop()
	case <-timer.C:
		n := 0
		for i := range r.running {
			if r.running[i].Load() != nil {
				n++
			}
		}
		if n == 0 {
			// The workers only wait to release what they hold
			// (awaitPolls): no handler to cancel.
			<-workDone
			break
		}
		r.log.Warn("consumer: shutdown timeout: cancelling running handlers", zap.Int("handlers", n))
		r.stopHandlers(ErrShutdown)
		<-workDone
		runErr = fmt.Errorf("consumer: shutdown: handlers still running after ShutdownTimeout (%s) were cancelled and released: %w", r.cfg.ShutdownTimeout, context.DeadlineExceeded)
	}
	stopHB()
	hbWG.Wait()
	r.batcher.close()
	settleWG.Wait()
	r.log.Info("consumer stopped")
	if r.fatal != nil { // set by a receiver, all of which returned
		return errors.Join(r.fatal, runErr)
	}
	return runErr
}

// failRun stops the Run, which returns err once drained; only the first
// call counts.
func (r *runner) failRun(err error) {
	r.failOne.Do(func() {
		r.log.Error("consumer: stopping: receives keep failing", zap.Error(err))
		r.fatal = err
		r.stopRun(err)
	})
}

// receiveFailed records and reports a receive that failed with err (the
// failures-th in a row of receiver id), and stops the Run once receives
// have failed with only errors that retrying cannot heal for
// ReceiveErrorGrace.
func (r *runner) receiveFailed(id, failures int, err error) {
	r.obs.ReceiveFailed(err)
	persistent := sqserr.Persistent(err)
	stuck := r.health.failed(err, persistent, time.Now())
	if !persistent {
		r.log.Warn("consumer: receive failed", zap.Int("receiver", id), zap.Int("failures", failures), zap.Error(err))
		return
	}
	code := sqserr.Code(err)
	r.log.Warn("consumer: receive failed with an error that retrying cannot heal; Run stops once it has lasted ReceiveErrorGrace",
		zap.Int("receiver", id), zap.Int("failures", failures), zap.String("error_code", code),
		zap.Duration("failing_for", stuck), zap.Duration("receive_error_grace", r.cfg.ReceiveErrorGrace), zap.Error(err))
	if stuck >= r.cfg.ReceiveErrorGrace {
		r.failRun(fmt.Errorf("consumer: queue %s: receives failed for %s with %s, which retrying cannot heal: %w",
			r.q.url, stuck.Round(time.Second), code, err))
	}
}

// receive is one receiver's loop: reserve free capacity, long-poll for at
// most that many messages, hand them to the dispatcher. Between calls it
// does what nextReceive and afterReceive decide (attempt.go): a FIFO
// receive that failed is retried with the same ReceiveRequestAttemptId
// and size, so that SQS returns the messages of a lost response.
//
// An ahead receiver (one of receive-ahead's) takes slots only while
// receive-ahead adds some.
func (r *runner) receive(ctx, callCtx context.Context, id int, ahead bool) {
	var (
		st      receiveState
		n       int  // slots held for the receive being made (or retried)
		at      mark // when they were taken, for receive-ahead
		tracked []heartbeat.Received
	)
	defer func() { r.capacity.unreserve(n) }()
	for {
		if n == 0 && ahead && !r.capacity.ahead(ctx) {
			return
		}
		// Paused (BackPressure): no receive, but one for a probe when
		// nothing received is left to probe with, asking for one message.
		probe, ok := r.gate.receiving(ctx.Done())
		if !ok {
			return
		}
		endProbe := func(got int) {
			if probe {
				probe = false
				r.gate.probeReceived(got)
			}
		}
		// A turn first, then the slots: a receiver waiting for its turn
		// holds none.
		t, ok := r.pollers.acquire(ctx)
		if !ok {
			endProbe(-1)
			return
		}
		if n == 0 {
			want := sqslimits.MaxBatchEntries
			if probe {
				want = 1
			}
			var err error
			if n, at, err = r.capacity.reserve(ctx, want); err != nil {
				t.done(-1, 0)
				endProbe(-1)
				return
			}
		}
		if ctx.Err() != nil {
			// Shutting down: no new receive (its call would run under
			// callCtx, which outlives ctx for the calls already in flight).
			t.done(-1, 0)
			endProbe(-1)
			return
		}
		if !probe && !r.gate.isOpen() {
			// Paused while this receiver waited for its turn or its slots.
			t.done(-1, 0)
			if st.attemptID == "" { // not a FIFO receive being retried: its slots go back
				r.capacity.unreserve(n)
				n = 0
			}
			continue
		}
		in := &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(r.q.url),
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             int32(r.cfg.WaitTime / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		}
		if r.cfg.VisibilityTimeout > 0 {
			in.VisibilityTimeout = int32(r.cfg.VisibilityTimeout / time.Second)
		}
		var call receiveCall
		st, call = nextReceive(st, r.q.fifo, time.Now(), newAttemptID)
		if call.attemptID != "" {
			in.ReceiveRequestAttemptId = aws.String(call.attemptID)
		}
		start := call.start
		// A response lost on the network must not hang the receiver:
		// bound the call by the long-poll wait plus a margin.
		cctx, cancel := context.WithTimeout(callCtx, r.cfg.WaitTime+10*time.Second)
		t.calling()
		out, err := r.cfg.Client.ReceiveMessage(cctx, in)
		returned := time.Now()
		cancel()
		got := -1 // failed: the limit stays
		if err == nil {
			got = len(out.Messages)
		}
		t.done(n, got)
		if err != nil {
			endProbe(-1)
			if ctx.Err() != nil {
				return
			}
			var act receiveAction
			st, act = afterReceive(st, r.q.fifo, n, -1)
			if !act.keep {
				r.capacity.unreserve(act.release)
				n = 0
			}
			r.receiveFailed(id, st.failures, err)
			d := time.Duration(rand.Int64N(int64(act.backoff) + 1))
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			continue
		}
		var act receiveAction
		st, act = afterReceive(st, r.q.fifo, n, len(out.Messages))
		r.health.received()
		if act.short {
			r.capacity.unreserve(act.release)
			r.capacity.short(act.empty)
		} else if act.full {
			r.capacity.observe(at)
		}
		n = 0
		now := r.cfg.NowFunc()
		r.unsettled.Add(int64(len(out.Messages)))
		batch := make([]*inflight, 0, len(out.Messages))
		tracked = tracked[:0]
		for _, raw := range out.Messages {
			rm := newReceived(r.limits != nil)
			delivery.Init(&rm.msg, raw, r.q.url, now)
			m := &rm.rec
			m.r, m.msg, m.recvAt = r, &rm.msg, start.Sub(r.epoch)
			msgstate.SetBeatEvery(m.msg, orDefault(r.cfg.HeartbeatInterval, r.q.visibility/3))
			r.obs.Received(m.msg)
			batch = append(batch, m)
			tracked = append(tracked, heartbeat.Received{Handle: m.handle(), Owner: m})
		}
		// The visibility runs from the response (a message can arrive
		// late in a long poll), SQS's 12 hours from the call.
		r.hb.AddBatch(start, returned, tracked)
		clear(tracked) // the buffer outlives the messages: no references kept
		r.dispatch(batch)
		// After the dispatch, so that the probe's message counts as held.
		endProbe(len(batch))
	}
}

// receiveGrace is how long a receive call in flight at shutdown may still
// take: on a busy queue SQS answers at once, and what it returns is
// released; a long poll of an empty queue is cancelled after it.
const receiveGrace = time.Second

// dispatch queues a receive's messages for the next free workers
// (standard queues) or appends each to its group's lane (FIFO).
//
// A receive's messages are appended to their lanes under one hold of
// r.mu, and the lanes it makes ready are handed to the workers only after
// it: handed out one at a time, a worker could finish a group's first
// message (retried, say), find the lane empty and drop it, and the group's
// next message of the same receive would start in a new lane, ahead of the
// retry. Handed out after r.mu is released, a woken worker does not wait
// for it.
//
// The ready lanes are sent in one burst, each waking a parked worker: the
// Go scheduler wakes idle threads for the burst as a whole, not for each
// send. Waking one worker, which wakes the next if lanes are still
// waiting, wakes fewer goroutines but can wake a thread at each step (see
// "Few shared locks per message" in docs/architecture.md).
func (r *runner) dispatch(batch []*inflight) {
	if !r.q.fifo {
		for _, m := range batch {
			msgstate.SetUnrun(m.msg, r.unrun.Count(m.msg.ID)) // no lock while none is counted
			r.queue <- m                                      // never full: it holds the most slots capacity has
		}
		return
	}
	var buf [sqslimits.MaxBatchEntries]*lane
	ready := buf[:0]
	r.mu.Lock()
	for _, m := range batch {
		msgstate.SetUnrun(m.msg, r.unrun.Count(m.msg.ID))
		l, ok := r.lanes[m.msg.GroupID]
		if !ok {
			if n := len(r.spare); n > 0 {
				l, r.spare = r.spare[n-1], r.spare[:n-1]
				l.group = m.msg.GroupID
			} else {
				l = &lane{group: m.msg.GroupID}
			}
			r.lanes[m.msg.GroupID] = l
		}
		l.queue = append(l.queue, m)
		if !l.active {
			l.active = true
			ready = append(ready, l)
		}
	}
	for _, l := range ready {
		l.pop(r.q.maxReceives)
	}
	r.mu.Unlock()
	for _, l := range ready {
		r.ready <- l // never full: each lane in it holds a received message
	}
}

// pop moves the first queued message to head, noting whether a message
// left waiting behind it is at its last receive by the queue's
// maxReceiveCount (maxReceives, 0 for none); r.mu is held.
func (l *lane) pop(maxReceives int) {
	n := len(l.queue)
	// Shifted down rather than resliced, so that the lane keeps its array
	// when it is reused.
	l.head = l.queue[0]
	copy(l.queue, l.queue[1:])
	l.queue[n-1] = nil
	l.queue = l.queue[:n-1]
	l.head.lastBehind = false
	if maxReceives == 0 {
		return
	}
	for _, m := range l.queue {
		if settle.AtReceiveLimit(m.msg.ReceiveCount, maxReceives) {
			l.head.lastBehind = true
			break
		}
	}
}

// work is one of the Concurrency workers of a standard queue: it runs
// queued messages until the queue is closed, and releases those it takes
// once the consumer is stopping.
func (r *runner) work(worker int) {
	var tok limitToken // a rate token carried to the next message (Limits)
	for {
		m := next(r.capacity, r.queue)
		if m == nil {
			return // closed
		}
		select {
		case <-r.stopping:
			r.releaseUnstarted(m)
			continue
		default:
		}
		for {
			probe, ok := r.gate.admit(r.stopping)
			if !ok {
				r.releaseUnstarted(m)
				break
			}
			if r.limits != nil {
				v := r.limits.start(r.runCtx, m, nil, probe, &tok)
				if v == limitHeld {
					break // the limiter has it: sent back to the workers with a slot of its key
				}
				if v == limitStop {
					r.releaseUnstarted(m)
					break
				}
			}
			if _, held := r.process(worker, m, probe); !held {
				break
			}
			// A probe that found the downstream still unavailable: kept
			// for the next probe.
		}
	}
}

// next takes a worker's next value from ch, telling c when the worker
// found none waiting (receive-ahead's signal); the zero value once ch is
// closed.
func next[T any](c *capacity, ch <-chan T) T {
	select {
	case v := <-ch:
		return v
	default:
		c.waited()
		return <-ch
	}
}

// takeWaiting calls f with each value waiting in ch, without waiting for
// more.
func takeWaiting[T any](ch <-chan T, f func(T)) {
	for {
		select {
		case v := <-ch:
			f(v)
		default:
			return
		}
	}
}

// workLanes is one of the Concurrency workers of a FIFO queue: it takes a
// ready lane, runs its head, and puts the lane back at the end of the
// ready queue while it has more, so one group's messages run one at a
// time, in order, and groups take turns. After a message is retried or
// released, the group's other received messages are put back so that
// they are not run out of order (see stopLane); once the consumer is
// stopping, taken lanes are released.
func (r *runner) workLanes(worker int) {
	var tok limitToken // a rate token carried to the next message (Limits)
	for {
		l := next(r.capacity, r.ready)
		if l == nil {
			return // closed
		}
		m := l.head
		l.head = nil
		heldBack := false
		for {
			probe, ok := false, false
			select {
			case <-r.stopping:
			default:
				probe, ok = r.gate.admit(r.stopping)
			}
			if ok && r.limits != nil {
				switch r.limits.start(r.runCtx, m, l, probe, &tok) {
				case limitHeld:
					heldBack = true
				case limitStop:
					ok = false
				}
			}
			if heldBack {
				break // the limiter has the lane's head: the lane waits with it
			}
			if !ok {
				r.releaseUnstarted(m)
				r.releaseLane(l, nil)
				break
			}
			res, held := r.process(worker, m, probe)
			if held {
				continue // a failed probe, kept for the next (the lane waits with it)
			}
			if settle.StopsGroup(res.Outcome) {
				r.stopLane(l, res)
			}
			break
		}
		if heldBack {
			continue
		}

		r.mu.Lock()
		if len(l.queue) > 0 {
			l.pop(r.q.maxReceives)
			r.ready <- l // never full: see dispatch
		} else {
			l.active = false
			delete(r.lanes, l.group)
			// Reused by dispatch, which runs only while the receivers do:
			// the lanes the drain collects to release are not reused.
			if l.queue != nil && len(r.spare) < cap(r.ready) {
				r.spare = append(r.spare, l)
			}
		}
		r.mu.Unlock()
	}
}

// releaseLane releases every message queued in l.
func (r *runner) releaseLane(l *lane, why error) {
	r.mu.Lock()
	rest := l.queue
	l.queue = nil
	r.mu.Unlock()
	for _, m := range rest {
		r.release(m, why)
	}
}

// stopLane puts back the messages queued in l, which were received with
// its head, after the head ended with res (settle.StopsGroup): after a
// retry they are kept invisible for the head's delay, so the group comes
// back together, head first (settle.Behind); else they are visible again
// at once.
func (r *runner) stopLane(l *lane, res Result) {
	r.mu.Lock()
	rest := l.queue
	l.queue = nil
	r.mu.Unlock()
	if len(rest) == 0 {
		return
	}
	why := fmt.Errorf("consumer: an earlier message of group %q was not acked (%s)", l.group, res.Outcome)
	now := time.Now()
	for _, m := range rest {
		act := settle.Behind(res.Outcome, res.Delay, m.recvStart(), now)
		r.putBack(m, why, act.Visibility)
	}
}

// release settles a message that was not run: visibility 0.
func (r *runner) release(m *inflight, why error) { r.putBack(m, why, 0) }

// putBack settles a message that was not run (OutcomeRelease): its
// visibility is set to secs, and on a FIFO queue the receive is counted as
// one in which it did not run (see Message.Attempt).
func (r *runner) putBack(m *inflight, why error, secs int32) {
	res := Result{Outcome: OutcomeRelease, Err: why, Delay: time.Duration(secs) * time.Second}
	r.unrun.Set(m.msg.ID, msgstate.Unrun(m.msg)+1, time.Now())
	m.mu.Lock()
	lost := m.lost
	m.mu.Unlock()
	if lost != nil {
		// The heartbeat dropped it already: the message is visible again
		// (or with another consumer); the old handle is best left alone.
		res.Err = lost
		res.Delay = 0
		r.settled(m, res, false)
		return
	}
	r.settle(m, secs)
	r.settled(m, res, true)
}

// settle stops heartbeating m, then queues its delete (secs < 0) or its
// visibility change to secs.
//
// A delete only suspends m's handle in the heartbeat: the batcher forgets
// it once the delete is resolved, and hands it back to the heartbeat when
// the delete fails, so the message stays invisible (and is not handled
// again) while the delete is tried again. A delete never waits for an
// extension in flight; a visibility change does (a hung one is given up
// after settleCallTimeout), lest the extension land after it and undo it.
func (r *runner) settle(m *inflight, secs int32) {
	if secs < 0 {
		if msgstate.Unrun(m.msg) > 0 {
			r.unrun.Forget(m.msg.ID)
		}
		r.hb.Suspend(m.handle())
		r.batcher.delete(m.handle(), m.msg, r.slotDone)
	} else {
		<-r.hb.Detach(m.handle())
		r.batcher.changeVisibility(m.handle(), m.msg, secs, r.slotDone)
	}
	r.queued()
}

// queued counts a received message as settled: its op is in its batch, or
// it needs none. Only after the op is queued: a batcher that saw no
// message unsettled before this one's op was in its batch would send a
// partial batch, and this op alone after it (on a FIFO queue, two delete
// calls where one would do, each unlocking part of a receive's groups, so
// that the next receives come back short). The last one nudges the
// batcher, which sends the partial batches then.
func (r *runner) queued() {
	if r.unsettled.Add(-1) == 0 {
		if r.batcher.idle != nil {
			r.batcher.nudge()
		}
		r.gate.settledAll()
	}
}

// stopHandlers cancels the running handlers' contexts with cause, and
// those of any handler that starts after.
func (r *runner) stopHandlers(cause error) {
	r.handlersStopped.Store(true)
	for i := range r.running {
		if m := r.running[i].Load(); m != nil {
			m.mu.Lock()
			cancel := m.cancel
			m.mu.Unlock()
			if cancel != nil {
				cancel(cause)
			}
		}
	}
}

// process runs m's handler, on the given worker, and settles it; probe
// says the gate admitted it as the probe of a pause. A probe that found
// the downstream still unavailable is not settled but held (held true):
// the worker keeps it, still in the in-flight set, for the next probe.
func (r *runner) process(worker int, m *inflight, probe bool) (res Result, held bool) {
	ctx, cancel := context.WithCancelCause(r.workBase)
	defer cancel(nil)
	// Seen by stopHandlers, or the handlersStopped check below sees that
	// it ran (both atomic: one of the two sees the other).
	r.running[worker].Store(m)
	defer r.running[worker].Store(nil)
	m.mu.Lock()
	lost := m.lost
	if lost == nil {
		lost = r.untracked(m, "before it started")
	}
	if lost == nil {
		m.cancel = cancel
	}
	m.mu.Unlock()
	if lost != nil {
		res := Result{Outcome: OutcomeRelease, Err: lost}
		r.gate.done(probe, &res)
		r.settled(m, res, false)
		return res, false
	}
	if r.handlersStopped.Load() {
		cancel(ErrShutdown)
	}
	msgstate.StartRun(m.msg, m)

	res = r.pipeline.Process(ctx, m.msg)
	if r.limits != nil {
		r.limits.result(&res) // a RateLimited lowers an adaptive rate
	}
	// May pause the consumer, and then lengthens an Unavailable's delay to
	// the pause.
	hold := r.gate.done(probe, &res)
	if m.lastBehind && res.Outcome == OutcomeRetry && !hold {
		res = r.lastReceive(m, res)
	}

	msgstate.EndRun(m.msg)
	if hold {
		msgstate.ForgetHeartbeats(m.msg) // the next run registers its own (a dedupe claim per run)
	}
	m.mu.Lock()
	m.cancel = nil
	lost = m.lost
	m.mu.Unlock()
	if hold && lost == nil {
		lost = r.untracked(m, "while it ran")
	}
	if hold && lost == nil {
		r.log.Debug("consumer: the probe found the downstream still unavailable; the message is held for the next probe",
			zap.String("message_id", m.msg.ID), zap.String("key", m.msg.Key()), zap.String("error", pipeline.HandlerText(res.Err)))
		return res, true
	}
	leave := settle.LeaveLost(res.Outcome)
	if leave && lost == nil { // an ack is settled anyway: no lock taken
		lost = r.untracked(m, "while it ran")
	}
	if leave && lost != nil {
		// Visible again or with another consumer: left alone, as release
		// leaves a lost message it did not run. A lease extension that
		// failed left the handle with the heartbeat: it stops extending
		// it, and the message comes back when its visibility ends.
		r.hb.Remove(m.handle())
		res = Result{Outcome: OutcomeRelease, Err: fmt.Errorf("%w; left alone (the handler returned: %w)", lost, res.Err), Duration: res.Duration}
		r.settled(m, res, false)
		return res, false
	}

	if res.Outcome == OutcomeHold {
		res = r.hold(m, res)
		r.settled(m, res, true)
		return res, false
	}
	if res.Outcome == OutcomeDeadLetter {
		if err := r.deadLetter(m, res); err != nil {
			// Not dead-lettered, so not deleted: retry it later instead.
			res.Outcome = OutcomeRetry
			res.Err = fmt.Errorf("%w (dead-letter send failed: %v)", res.Err, err)
			var refused bool
			res.Delay, refused = settle.DeadLetterFailed(r.log, "consumer", settleMessage(m.msg), r.q.dlqURL, err, r.cfg.Backoff)
			if refused {
				r.obs.DeadLetterRefused(m.msg, err)
			}
		}
	}
	if r.cfg.Payload.DeleteAfterAck && msgstate.Object(m.msg) != nil && (res.Outcome == OutcomeAck || res.Outcome == OutcomeDuplicate) {
		msgstate.SetDropObject(m.msg)
	}
	now := time.Now()
	if settle.Unavailable(res.Outcome, res.Class) {
		// Not an attempt: its failure says nothing of the message.
		r.unrun.Set(m.msg.ID, msgstate.Unrun(m.msg)+1, now)
	}
	if act := settle.Decide(res.Outcome, res.Delay, m.recvStart(), now); act.Done {
		r.settle(m, -1)
	} else {
		r.settle(m, act.Visibility)
	}
	r.settled(m, res, true)
	return res, false
}

// lastReceive turns the retry of a FIFO message into a dead letter (class
// max_attempts) when a later message of its group, received with it and
// waiting behind it, is at its last receive by the queue's
// maxReceiveCount (m.lastBehind): put back, that message would be moved
// to the DLQ by SQS on its next receive without ever having run. Only
// when m is at its last receive too (SQS returns a group's later messages
// only with the earlier ones, so it has been received at least as often):
// SQS would move it on its next receive anyway, without its failure, so
// nothing is taken from it; dead-lettered here, the messages behind it
// run now. Not when m's lease was lost: it may be another consumer's.
func (r *runner) lastReceive(m *inflight, res Result) Result {
	if !settle.AtReceiveLimit(m.msg.ReceiveCount, r.q.maxReceives) {
		return res
	}
	m.mu.Lock()
	lost := m.lost
	m.mu.Unlock()
	if lost != nil {
		return res
	}
	r.log.Warn("consumer: a later message of the group is at the queue's maxReceiveCount: dead-lettering this one instead of retrying it, so that message runs",
		zap.String("message_id", m.msg.ID), zap.String("key", m.msg.Key()), zap.String("group", m.msg.GroupID),
		zap.Int("receive_count", m.msg.ReceiveCount), zap.Int("max_receive_count", r.q.maxReceives))
	res.Outcome = OutcomeDeadLetter
	res.Class = ClassMaxAttempts
	res.Delay = 0
	res.Reason = fmt.Sprintf("max receive count (%d) reached, with a later message of its group waiting: %s", r.q.maxReceives, pipeline.HandlerText(res.Err))
	return res
}

// untracked returns an error wrapping ErrLeaseLost when the heartbeat no
// longer tracks m's handle: it found the handle lost in a round whose lost
// callbacks it is still calling (m's has not run yet). when says when, for
// the error.
func (r *runner) untracked(m *inflight, when string) error {
	if r.hb.Tracked(m.handle()) {
		return nil
	}
	return fmt.Errorf("%w: its visibility was lost %s", ErrLeaseLost, when)
}

// deadLetter sends m to the DLQ (the heartbeat keeps it invisible
// meanwhile).
func (r *runner) deadLetter(m *inflight, res Result) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.workBase), settleCallTimeout)
	defer cancel()
	err := settle.Send(ctx, r.cfg.Client, r.log, "consumer", settle.Letter{
		Msg: settleMessage(m.msg), Reason: deadLetterReason(res), Class: res.Class, Step: settle.Step(res.Err),
		SourceQueue: r.q.url, DLQ: r.q.dlqURL, FIFO: r.q.fifo, MaxSize: r.q.dlqMaxSize, Now: r.cfg.NowFunc(), SigningKey: r.cfg.DeadLetterSigningKey,
	})
	r.obs.DeadLettered(m.msg, err)
	return err
}

// settled reports m's outcome and frees its slot, or, when queued on a
// FIFO queue, leaves that to slotDone once the settle call returned.
func (r *runner) settled(m *inflight, res Result, queued bool) {
	if !queued {
		r.queued()
	}
	if m.lim != nil && m.lim.keyed {
		r.limits.done(m) // its key's slot freed: a held message of the key is woken
	}
	pipeline.LogSettled(r.log, m.msg, res)
	r.obs.Settled(m.msg, res)
	if !queued || r.slotDone == nil {
		r.capacity.release(1)
	}
}

// LeaseLost is the heartbeat telling m that its visibility is lost.
func (m *inflight) LeaseLost(err error) { m.r.leaseLost(m, err) }

// leaseLost records that m's visibility or dedupe lease is lost and
// cancels its handler (if running) with a cause wrapping ErrLeaseLost; a
// message that has not started will not run.
func (r *runner) leaseLost(m *inflight, err error) {
	lerr := fmt.Errorf("%w: %w", ErrLeaseLost, err)
	m.mu.Lock()
	if m.lost != nil {
		m.mu.Unlock()
		return
	}
	m.lost = lerr
	cancel := m.cancel
	m.mu.Unlock()
	r.log.Warn("consumer: lease lost", zap.String("message_id", m.msg.ID), zap.String("key", m.msg.Key()), zap.Error(err))
	r.obs.LeaseLost(m.msg, lerr)
	if cancel != nil {
		cancel(lerr)
	}
}

// Watch and Unwatch make m the msgstate.Watcher of its Message while its
// handler runs.
func (m *inflight) Watch()   { m.r.watch(m) }
func (m *inflight) Unwatch() { m.r.unwatch(m) }

// watch has the heartbeat tick m's Message.OnHeartbeat functions while
// its handler runs; unwatch stops that. Both are called under the lock
// of m's msgstate.State, which orders them (a function registered as the
// handler returns is watched before, or not at all); lock order: that
// lock, then r.mu. Only messages that registered one are in r.beating, so
// a message without one costs no lock of r.mu while it runs.
func (r *runner) watch(m *inflight) {
	r.mu.Lock()
	r.beating[m] = struct{}{}
	r.mu.Unlock()
}

func (r *runner) unwatch(m *inflight) {
	r.mu.Lock()
	delete(r.beating, m)
	r.mu.Unlock()
}

// beatHandlers runs, on each heartbeat tick, the functions running handlers
// registered with Message.OnHeartbeat; an error cancels that handler.
func (r *runner) beatHandlers(ctx context.Context) {
	if r.limits != nil {
		r.limits.extend(ctx)
	}
	r.mu.Lock()
	var ms []*inflight
	for m := range r.beating {
		ms = append(ms, m)
	}
	r.mu.Unlock()
	timeout := orDefault(r.cfg.HeartbeatInterval, r.q.visibility/3)
	var wg sync.WaitGroup
	for _, m := range ms {
		fns := msgstate.Heartbeats(m.msg)
		if len(fns) == 0 {
			continue
		}
		wg.Go(func() {
			bctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			for _, fn := range fns {
				if err := r.beat(bctx, m, fn); err != nil {
					r.leaseLost(m, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// beat runs one of m's OnHeartbeat functions; a panic in it is recovered,
// logged, and returned as its error.
func (r *runner) beat(ctx context.Context, m *inflight, fn func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pipeline.LogPanic(r.log, "an OnHeartbeat function", v, zap.String("message_id", m.msg.ID), zap.String("key", m.msg.Key()))
			err = fmt.Errorf("consumer: OnHeartbeat function panicked: %v", v)
		}
	}()
	return fn(ctx)
}
