package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/backoff"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/internal/telemetry"
	"github.com/sqsonce/sqsonce/producer"
)

// AttrType is the message attribute that carries Event.Type.
const AttrType = "sqsonce-event-type"

// RelayConfig configures a [Relay]. Store, Client and QueueURL are required.
type RelayConfig struct {
	// Store holds the events.
	Store Store
	// Client sends to SQS; it also reads the queue's MaximumMessageSize
	// (GetQueueAttributes) once, before the first step publishes.
	Client producer.SQSAPI
	// QueueURL is where events are published. On a FIFO queue the entity is
	// the MessageGroupId and the event id the MessageDeduplicationId.
	QueueURL string
	// Owner names this relay in the store's partition leases. Defaults to
	// a random id.
	Owner string
	// PollInterval is the wait after a poll that found nothing to publish.
	// Defaults to 200ms.
	PollInterval time.Duration
	// WaitFunc, when set, is how the relay waits after a poll that found
	// nothing to publish, instead of sleeping: it blocks until events may
	// be due (woken, e.g. by a commit's NOTIFY: the PostgreSQL outbox's
	// Listener.Wait), d (PollInterval) passes, or ctx ends; the relay polls
	// after it returns either way. Polling stays the fallback: after an
	// error (a lost connection) the relay logs it, sleeps
	// min(PollInterval, 1s), polls, and calls WaitFunc again, which
	// reconnects. With a WaitFunc, PollInterval can be long (seconds to a
	// minute): it only bounds how late a missed wake-up is noticed.
	// Defaults to nil: the relay sleeps PollInterval.
	WaitFunc func(ctx context.Context, d time.Duration) (woken bool, err error)
	// BatchSize is the most events taken per poll. Defaults to 100.
	BatchSize int
	// MaxAttempts is how many failed sends park an event as dead. An event
	// SQS can never take as it is (producer.ErrInvalid: too large for the
	// queue, characters or an entity SQS refuses as a group id, refused by
	// SQS as the sender's fault) is parked at its first failed send.
	// Defaults to 10.
	MaxAttempts int
	// BackoffBase and BackoffMax bound the full-jitter wait before an
	// event's next attempt. Default to 1s and 5m.
	BackoffBase, BackoffMax time.Duration
	// StatsInterval is how often the relay reads [Stats] for the Observer.
	// Defaults to 10s.
	StatsInterval time.Duration
	// Observer is told what the relay does. Defaults to none.
	Observer Observer
	// MeterProvider, when set, records the relay's metrics (the
	// sqsonce.outbox.* names in docs/observability.md):
	// events published, failed sends, events parked as dead, and every
	// StatsInterval the pending count, the dead count and the oldest
	// pending event's age. The Observer is still called. Defaults to nil:
	// nothing is measured.
	MeterProvider metric.MeterProvider
	// Logger receives a warning per failed send and an error per parked
	// event (ids and reasons, never payloads). Defaults to zap.NewNop().
	Logger *zap.Logger
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
	// Payload stores the payloads of events too large for the queue in
	// S3, and compresses payloads, as the producer does (see
	// producer.PayloadConfig); consumers built with sqsonce get the
	// payload back before their handler runs. Defaults to neither: an
	// event too large for the queue is parked as dead.
	Payload producer.PayloadConfig
}

// Observer receives the relay's counts; embed [NopObserver] to implement
// only some methods.
type Observer interface {
	// Published is called with the events SQS accepted.
	Published(evs []Event)
	// SendFailed is called for an event whose send failed; dead says it is
	// now parked.
	SendFailed(ev Event, err error, dead bool)
	// Stats is called every StatsInterval with the outbox's pending count
	// and the age of its oldest pending event.
	Stats(s Stats, oldestAge time.Duration)
}

// NopObserver does nothing.
type NopObserver struct{}

func (NopObserver) Published([]Event)             {}
func (NopObserver) SendFailed(Event, error, bool) {}
func (NopObserver) Stats(Stats, time.Duration)    {}

// Relay publishes committed events to SQS. It may publish an event twice
// (a crash between the send and its removal from the store), never loses
// one, and publishes each entity's events in commit order, also when
// several relays run at once.
type Relay struct {
	cfg  RelayConfig
	prod *producer.Producer
}

// NewRelay checks cfg and fills its defaults.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("outbox: RelayConfig.Store is required")
	case cfg.Client == nil:
		return nil, errors.New("outbox: RelayConfig.Client is required")
	case cfg.QueueURL == "":
		return nil, errors.New("outbox: RelayConfig.QueueURL is required")
	case cfg.PollInterval < 0 || cfg.BatchSize < 0 || cfg.MaxAttempts < 0 || cfg.BackoffBase < 0 || cfg.BackoffMax < 0 || cfg.StatsInterval < 0:
		return nil, errors.New("outbox: RelayConfig durations and counts must not be negative")
	}
	if cfg.Owner == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		cfg.Owner = "relay-" + hex.EncodeToString(b)
	}
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 200*time.Millisecond)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 100)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 10)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, time.Second)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, 5*time.Minute)
	cfg.StatsInterval = cmp.Or(cfg.StatsInterval, 10*time.Second)
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	cfg = instrument(cfg)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	// The relay keeps its own per-event backoff across polls, so each send
	// is one attempt here. Each message carries its event's trace context,
	// never the relay's own.
	prod, err := producer.New(producer.Config{Client: cfg.Client, QueueURL: cfg.QueueURL, MaxAttempts: 1, Logger: cfg.Logger, NoTraceContext: true, Payload: cfg.Payload})
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &Relay{cfg: cfg, prod: prod}, nil
}

// Owner is the name this relay holds partitions under.
func (r *Relay) Owner() string { return r.cfg.Owner }

// Run publishes until ctx ends, then releases its partitions and returns
// nil. A store error is logged and retried after PollInterval; Run returns
// early only when ctx ends.
//
// With a [RunStore], Run reads the next batch, and removes the previous
// batch's published events, while the current batch is being sent, so
// that the store's round trips overlap SQS's: the next batch's entities
// with events in the current one start after them, an entity whose send
// failed sends nothing of the next batch. A removal may go on into the
// next batch's sends (one removal at a time): the reads meanwhile name its
// events as in flight, and what was published is removed before Run
// returns. With a [PublishedRunStore], the removal and the next read are
// one call.
func (r *Relay) Run(ctx context.Context) error {
	var lastStats time.Time
	rs, pipelined := r.cfg.Store.(RunStore)
	var p pipeline
	// The Stats read goes on beside the steps (it reads the whole outbox
	// of some stores); the Observer is told between steps.
	var stats chan func()
	report := func(wait bool) {
		if stats == nil {
			return
		}
		if wait {
			(<-stats)()
			stats = nil
			return
		}
		select {
		case tell := <-stats:
			tell()
			stats = nil
		default:
		}
	}
	defer report(true)
	for ctx.Err() == nil {
		report(false)
		if now := r.cfg.NowFunc(); stats == nil && now.Sub(lastStats) >= r.cfg.StatsInterval {
			lastStats = now
			ch := make(chan func(), 1)
			stats = ch
			go func() {
				s, err := r.cfg.Store.Stats(ctx)
				ch <- func() {
					if err != nil {
						return
					}
					age := time.Duration(0)
					if !s.Oldest.IsZero() {
						age = now.Sub(s.Oldest)
					}
					r.cfg.Observer.Stats(s, age)
				}
			}()
		}
		var (
			n   int
			err error
		)
		if pipelined {
			n, err = r.pipelinedStep(ctx, rs, &p)
		} else {
			n, err = r.Step(ctx)
		}
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("outbox: relay step failed", zap.String("owner", r.cfg.Owner), zap.Error(err))
		}
		if n > 0 && err == nil {
			// More may be due: a step takes at most an entity's oldest
			// event (or its share of the batch, from a RunStore), so a
			// short batch does not mean an empty outbox.
			continue
		}
		r.wait(ctx)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.flush(rctx, &p); err != nil {
		r.cfg.Logger.Warn("outbox: remove published events", zap.String("owner", r.cfg.Owner), zap.Error(err))
	}
	if err := r.cfg.Store.Release(rctx, r.cfg.Owner); err != nil {
		r.cfg.Logger.Warn("outbox: release partitions", zap.String("owner", r.cfg.Owner), zap.Error(err))
	}
	return nil
}

// pipeline is what Run carries from one batch to the next with a
// [RunStore].
type pipeline struct {
	next     []Event         // the batch read while the last one was sent
	read     bool            // next was read (and may be empty)
	stopped  map[string]bool // entities whose send failed in the last batch
	sent     []Event         // published in the last batch, not yet removed
	removing []*removal      // earlier batches' removals, oldest first, maybe still going on
}

// removal is the removal of published events, going on while the relay
// sends and reads: done is closed when it returned.
type removal struct {
	evs  []Event
	done chan struct{}
	err  error
}

// remove adds to p's removals one of evs, which starts once the last of
// them (if any) returned, so that one removal goes on at a time. They are
// removed even when Run is being stopped: sent events left in the store
// are sent again by the partition's next owner.
func (r *Relay) remove(ctx context.Context, p *pipeline, evs []Event) {
	var after *removal
	if len(p.removing) > 0 {
		after = p.removing[len(p.removing)-1]
	}
	rm := &removal{evs: evs, done: make(chan struct{})}
	p.removing = append(p.removing, rm)
	go func() {
		defer close(rm.done)
		if after != nil {
			<-after.done
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		rm.err = r.cfg.Store.Published(rctx, evs)
	}()
}

// settle waits until at most keep of p's removals are going on, tells the
// Observer what the others removed, and returns their errors.
func (r *Relay) settle(p *pipeline, keep int) error {
	var errs []error
	for len(p.removing) > 0 {
		rm := p.removing[0]
		if len(p.removing) <= keep {
			select {
			case <-rm.done:
			default:
				return errors.Join(errs...)
			}
		}
		<-rm.done
		p.removing = p.removing[1:]
		if rm.err != nil {
			// They will be published again: a duplicate, never a loss.
			errs = append(errs, rm.err)
			continue
		}
		r.cfg.Observer.Published(rm.evs)
	}
	p.removing = nil
	return errors.Join(errs...)
}

// prefetched is the outcome of the read done while a batch is sent.
type prefetched struct {
	evs []Event
	err error
	// With a PublishedRunStore: the events its call removed, or, when
	// the call failed, the events left to remove on their own.
	published, unremoved []Event
}

// pipelinedStep sends p.next (or, when nothing was read ahead, a batch it
// reads now) while it reads the next batch and removes the previous
// batch's published events, and returns how many events it took. The
// removal may go on into the next step, which sends while it goes on and
// starts its own removal after it; the step after waits for it. The reads
// meanwhile name the events being removed as in flight, so that they are
// not handed out again.
func (r *Relay) pipelinedStep(ctx context.Context, rs RunStore, p *pipeline) (int, error) {
	if !p.read {
		// Nothing in flight: the last batch's events are removed first.
		if err := r.flush(ctx, p); err != nil {
			return 0, err
		}
		// The queue's size (read once, at the first step) is read
		// beside the batch: reading takes no event, so a queue that
		// cannot be read still costs the events no attempt.
		var limitErr error
		limitRead := make(chan struct{})
		go func() {
			defer close(limitRead)
			_, limitErr = r.prod.MaxMessageBytes(ctx)
		}()
		evs, err := rs.DueRuns(ctx, r.cfg.Owner, r.cfg.BatchSize, nil)
		<-limitRead
		if limitErr != nil {
			return 0, fmt.Errorf("outbox: %w", limitErr)
		}
		if err != nil || len(evs) == 0 {
			return 0, err
		}
		p.next, p.read = evs, true
	}
	evs, stopped := p.next, p.stopped
	p.next, p.read, p.stopped = nil, false, nil
	// With a PublishedRunStore, the last batch's published events are
	// removed by the call that reads the next one; a removal on its own
	// (after that call failed) is waited for first, so that the next
	// call removes and reads in one again.
	prs, _ := rs.(PublishedRunStore)
	keep := 1
	if prs != nil {
		keep = 0
	}
	var errs []error
	if err := r.settle(p, keep); err != nil {
		errs = append(errs, err)
	}
	var prev []Event
	if prs != nil && len(p.sent) > 0 && len(p.removing) == 0 && ctx.Err() == nil {
		prev, p.sent = p.sent, nil
	}
	if len(p.sent) > 0 {
		r.remove(ctx, p, p.sent)
		p.sent = nil
	}
	// In flight: the events being removed, and those that will be sent:
	// an entity stopped in the last batch sends nothing of this one, and
	// its run starts where it was.
	n := len(evs)
	for _, rm := range p.removing {
		n += len(rm.evs)
	}
	inFlight := make([]Event, 0, n)
	for _, rm := range p.removing {
		inFlight = append(inFlight, rm.evs...)
	}
	for _, ev := range evs {
		if !stopped[ev.Entity] {
			inFlight = append(inFlight, ev)
		}
	}
	done := make(chan prefetched, 1)
	go func() {
		var f prefetched
		if len(prev) > 0 {
			// One round trip. As a removal alone, it is not cut short
			// when Run is being stopped.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
			evs, err := prs.PublishedDueRuns(rctx, r.cfg.Owner, r.cfg.BatchSize, prev, inFlight)
			cancel()
			if err == nil {
				f.evs, f.published = evs, prev
				done <- f
				return
			}
			// Neither took effect: the read names them as in flight, and
			// they are removed on their own after it.
			f.unremoved = prev
			inFlight = append(inFlight, prev...)
		}
		f.evs, f.err = rs.DueRuns(ctx, r.cfg.Owner, r.cfg.BatchSize, inFlight)
		done <- f
	}()
	sent, failed, sendErrs := r.send(ctx, evs, stopped)
	errs = append(errs, sendErrs...)
	f := <-done
	if len(f.published) > 0 {
		r.cfg.Observer.Published(f.published)
	}
	if len(f.unremoved) > 0 {
		r.remove(ctx, p, f.unremoved)
	}
	p.sent = sent
	if f.err == nil && len(f.evs) > 0 {
		p.next, p.read, p.stopped = f.evs, true, failed
	} else if f.err != nil {
		errs = append(errs, f.err)
	}
	if !p.read {
		// Nothing read ahead: remove what was published now, so the
		// outbox is as the step left it when the relay waits.
		if err := r.flush(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return len(evs), errors.Join(errs...)
}

// flush waits for p's removal going on and removes the events p holds as
// published and not yet removed.
func (r *Relay) flush(ctx context.Context, p *pipeline) error {
	err := r.settle(p, 0)
	sent := p.sent
	p.sent = nil
	if len(sent) == 0 {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	if rerr := r.cfg.Store.Published(rctx, sent); rerr != nil {
		return errors.Join(err, rerr)
	}
	r.cfg.Observer.Published(sent)
	return err
}

// removeTimeout bounds the removal of published events, which goes on
// when Run is stopped.
const removeTimeout = 5 * time.Second

// waitRetry is the longest sleep after a failed WaitFunc: the relay polls
// at this pace until WaitFunc works again.
const waitRetry = time.Second

// wait waits for the next poll: WaitFunc, or PollInterval.
func (r *Relay) wait(ctx context.Context) {
	d := r.cfg.PollInterval
	if r.cfg.WaitFunc != nil {
		_, err := r.cfg.WaitFunc(ctx, d)
		if err == nil || ctx.Err() != nil {
			return
		}
		r.cfg.Logger.Warn("outbox: relay wait failed: polling until it works again", zap.String("owner", r.cfg.Owner), zap.Error(err))
		d = min(d, waitRetry)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Step publishes one batch of due events and returns how many it took.
//
// A batch may hold several events of one entity (a [RunStore] hands out
// entities' ready runs, in commit order): they go out in waves, the first
// wave each entity's first event, the next wave each entity's second, and
// so on, so that an entity's event is sent only once its previous one was
// accepted, and an entity whose event failed sends nothing more in the
// step (its later events stay held back behind the failed one). The
// batch's published events are removed with one Published call.
func (r *Relay) Step(ctx context.Context) (int, error) {
	// Before taking events: a queue that cannot be read is no fault of
	// theirs, and counts as no attempt.
	if _, err := r.prod.MaxMessageBytes(ctx); err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	var evs []Event
	var err error
	if rs, ok := r.cfg.Store.(RunStore); ok {
		evs, err = rs.DueRuns(ctx, r.cfg.Owner, r.cfg.BatchSize, nil)
	} else {
		evs, err = r.cfg.Store.Due(ctx, r.cfg.Owner, r.cfg.BatchSize)
	}
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	sent, _, errs := r.send(ctx, evs, nil)
	if len(sent) > 0 {
		if err := r.cfg.Store.Published(ctx, sent); err != nil {
			// They will be published again: a duplicate, never a loss.
			errs = append(errs, err)
		}
		r.cfg.Observer.Published(sent)
	}
	return len(evs), errors.Join(errs...)
}

// send sends evs in waves (see Step), nothing of the entities in skip, and
// returns the events SQS accepted, the entities whose send failed, and the
// errors of recording the failures.
func (r *Relay) send(ctx context.Context, evs []Event, skip map[string]bool) (sent []Event, failed map[string]bool, errs []error) {
	stopped := map[string]bool{}
	for e := range skip {
		stopped[e] = true
	}
	for wave := range waves(evs) {
		if ctx.Err() != nil {
			break // not sent: the events stay as they are
		}
		msgs := make([]producer.Message, 0, len(wave))
		idx := make([]int, 0, len(wave))
		// The strings the messages' attributes point to, in one
		// allocation: "String", then each event's id and type.
		strs := make([]string, 1, 1+2*len(wave))
		strs[0] = "String"
		for _, i := range wave {
			if !stopped[evs[i].Entity] {
				strs = append(strs, evs[i].ID, evs[i].Type)
				n := len(strs)
				msgs, idx = append(msgs, r.message(evs[i], &strs[n-2], &strs[n-1], &strs[0])), append(idx, i)
			}
		}
		if len(idx) == 0 {
			break
		}
		for j, res := range r.prod.SendBatch(ctx, msgs) {
			ev := evs[idx[j]]
			if res.Err == nil {
				if sent == nil {
					sent = make([]Event, 0, len(evs))
				}
				sent = append(sent, ev)
				continue
			}
			stopped[ev.Entity] = true
			if failed == nil {
				failed = map[string]bool{}
			}
			failed[ev.Entity] = true
			if ctx.Err() != nil {
				continue // not a failure of the event: it stays as it is
			}
			if err := r.failed(ctx, ev, res.Err); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return sent, failed, errs
}

// waves yields the indexes of evs wave by wave: the first yields each
// entity's first event, the next each entity's second, and so on, each in
// the order of evs. With one event per entity there is one wave.
func waves(evs []Event) func(yield func([]int) bool) {
	return func(yield func([]int) bool) {
		place := make([]int, len(evs)) // the event's place in its entity's run
		count := make(map[string]int, len(evs))
		last := 0
		for i, ev := range evs {
			place[i] = count[ev.Entity]
			count[ev.Entity]++
			last = max(last, place[i])
		}
		if last == 0 {
			all := make([]int, len(evs))
			for i := range all {
				all[i] = i
			}
			yield(all)
			return
		}
		for w := 0; w <= last; w++ {
			var wave []int
			for i, p := range place {
				if p == w {
					wave = append(wave, i)
				}
			}
			if !yield(wave) {
				return
			}
		}
	}
}

// message is the SQS message of ev; id, typ and str point to ev.ID,
// ev.Type and "String", and must not change until it is sent.
//
// Its attributes hold sqsonce-id too (when ev has an id), as the producer
// sends it: the producer then sends them as they are, without a copy.
func (r *Relay) message(ev Event, id, typ, str *string) producer.Message {
	m := producer.Message{ID: ev.ID, Body: ev.Payload, GroupID: ev.Entity, NotBefore: ev.NotBefore}
	attrs := make(map[string]types.MessageAttributeValue, 2)
	room := sqslimits.MaxMessageAttributes - 1 // one slot stays for sqsonce-id, as the producer keeps it
	if ev.ID != "" {
		attrs[producer.AttrID] = types.MessageAttributeValue{DataType: str, StringValue: id}
		room++
	}
	if ev.Type != "" {
		attrs[AttrType] = types.MessageAttributeValue{DataType: str, StringValue: typ}
	}
	if len(ev.Trace) > 0 {
		// The writer's trace, not the relay's.
		writer := telemetry.Propagator.Extract(context.Background(), propagation.MapCarrier(ev.Trace))
		telemetry.Inject(writer, attrs, room)
	}
	if len(attrs) > 0 {
		m.Attributes = attrs
	}
	return m
}

// failed records the failed send of ev: a retry later, or parked as dead.
func (r *Relay) failed(ctx context.Context, ev Event, sendErr error) error {
	attempts := ev.Attempts + 1
	dead := attempts >= r.cfg.MaxAttempts || errors.Is(sendErr, producer.ErrInvalid)
	retryAt := r.cfg.NowFunc().Add(backoff.FullJitter(r.cfg.BackoffBase, r.cfg.BackoffMax, attempts, nil))
	ev.Attempts = attempts
	if dead {
		r.cfg.Logger.Error("outbox: event parked as dead after failed sends, holding back its entity's later events; `Requeue` sends it again, `Edit` replaces its payload, `Discard` drops it",
			zap.String("event_id", ev.ID), zap.Int("attempts", attempts), zap.Error(sendErr))
	} else {
		r.cfg.Logger.Warn("outbox: send failed, will retry", zap.String("event_id", ev.ID),
			zap.Int("attempts", attempts), zap.Time("retry_at", retryAt), zap.Error(sendErr))
	}
	err := r.cfg.Store.Failed(ctx, ev, sendErr.Error(), retryAt, dead)
	r.cfg.Observer.SendFailed(ev, sendErr, dead)
	return err
}
