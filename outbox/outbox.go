package outbox

import (
	"context"
	"errors"
	"hash/fnv"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// Event is one thing that happened, written in the same transaction as the
// change it describes and published to SQS by a [Relay] after that
// transaction committed.
type Event struct {
	// ID identifies the event. It becomes the message's sqsonce-id (and the
	// FIFO MessageDeduplicationId), so a consumer applies an event that was
	// published twice only once. Defaults to a new UUIDv7.
	ID string
	// Entity is what the event is about (an account, an order). Events of
	// one entity are published in the order their transactions committed;
	// on a FIFO queue it is the MessageGroupId. Required.
	Entity string
	// Type is sent as the sqsonce-event-type message attribute when set.
	Type string
	// Payload is the message body. Required.
	Payload string
	// CreatedAt is when the event was written. Set by the writer.
	CreatedAt time.Time
	// NotBefore, when set, is the time before which the event must not
	// be handled: the relay sends it as soon as it is committed, as
	// producer.Message.NotBefore (SQS delays it up to 15 minutes; the
	// consumer holds it the rest of the way), so it must be within the
	// queue's MessageRetentionPeriod of the send, and the queue a
	// standard one: otherwise the send is refused and the event parked
	// (see [Store.Failed]). Events of one entity still leave in commit
	// order; a consumer applies each at its own time. Stores keep it to
	// the millisecond. Defaults to zero: handled when received.
	NotBefore time.Time
	// Trace is the writer's W3C trace context (traceparent, tracestate),
	// set by [WithTraceContext]. The relay sends it as message attributes,
	// so the consumer's span joins the writer's trace. Defaults to none.
	Trace map[string]string

	// Set by a Store when it hands the event to a relay.

	// Attempts counts failed sends so far.
	Attempts int
	// LastError is the reason of the last failed send.
	LastError string
	// Dead is set once the event was parked after MaxAttempts failures.
	Dead bool
	// Handle is the Store's own reference to the stored event.
	Handle string
}

// WithTraceContext returns ev carrying the W3C trace context of the span
// in ctx (none when ctx has no span): call it where the event is built, in
// the request that writes it.
func WithTraceContext(ctx context.Context, ev Event) Event {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ev
	}
	c := propagation.MapCarrier{}
	telemetry.Propagator.Inject(ctx, c)
	ev.Trace = c
	return ev
}

// Errors a writer returns for an event it cannot store.
var (
	ErrNoEntity  = errors.New("outbox: Event.Entity is required")
	ErrNoPayload = errors.New("outbox: Event.Payload is required")
)

// ErrNotDead is the error of [Store.Discard] and [Store.Edit] when no
// parked (dead) event has the id: it is unknown, published, or pending
// (only a dead event is never in a relay's hands).
var ErrNotDead = errors.New("outbox: no dead event has that id")

// Prepare checks ev, fills ID and CreatedAt and cuts NotBefore to the
// millisecond, as every writer does before storing an event.
func Prepare(ev *Event, now time.Time) error {
	if ev.Entity == "" {
		return ErrNoEntity
	}
	if ev.Payload == "" {
		return ErrNoPayload
	}
	if ev.ID == "" {
		ev.ID = uuid.Must(uuid.NewV7()).String()
	}
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = now
	}
	// Kept to the millisecond by every store.
	ev.NotBefore = ev.NotBefore.Truncate(time.Millisecond)
	return nil
}

// Store is where committed events wait to be published. Each backend
// (DynamoDB, PostgreSQL, memory) has its own writer, because writing
// happens inside that backend's transaction; the relay only reads through
// this interface.
//
// Entities are spread over partitions. A relay publishes only the events of
// the partitions it holds (a lease in the store), so at most one relay works
// on an entity at a time, and several relays share the partitions.
//
// Implementations must pass
// [github.com/sqsonce/sqsonce/outbox/outboxtest.Run].
type Store interface {
	// Due returns up to limit events that owner may publish now: for each
	// entity in owner's partitions, its oldest event, if it is neither dead
	// nor waiting for a retry. (A dead or waiting event holds back its
	// entity's later events, so they stay in commit order.) Due also takes
	// and renews owner's partition leases, sharing them with the other live
	// owners.
	Due(ctx context.Context, owner string, limit int) ([]Event, error)
	// Published removes events that were sent.
	Published(ctx context.Context, evs []Event) error
	// Failed records a failed send of ev (whose Attempts already counts
	// it): the attempts, the reason, and either the time of the next attempt or, when dead, that the
	// event is parked until [Store.Requeue].
	Failed(ctx context.Context, ev Event, reason string, retryAt time.Time, dead bool) error
	// Stats counts what is waiting.
	Stats(ctx context.Context) (Stats, error)
	// Requeue makes parked (dead) events pending again and returns how
	// many.
	Requeue(ctx context.Context) (int, error)
	// Discard deletes the parked (dead) event id without publishing it, so
	// that its entity's later events go out: for an event SQS can never
	// take. It returns [ErrNotDead] when no dead event has that id.
	Discard(ctx context.Context, id string) error
	// Edit replaces the payload of the parked (dead) event id and makes it
	// pending again, in its place in its entity's order, with its attempts
	// reset. It returns [ErrNotDead] when no dead event has that id, and
	// [ErrNoPayload] for an empty payload.
	Edit(ctx context.Context, id, payload string) error
	// Release gives up owner's partitions, so that another relay takes them
	// at once (a clean shutdown).
	Release(ctx context.Context, owner string) error
}

// RunStore is a [Store] that also hands out entities' ready runs, so that a
// relay takes a batch in one read however few entities share it, and reads
// its next batch while the current one is being sent. A [Relay] reads
// through DueRuns when its Store has it.
type RunStore interface {
	Store
	// DueRuns is [Store.Due] with, for each entity in owner's partitions,
	// its ready run rather than its oldest event only: its oldest events
	// in commit order, up to the first that is dead or waiting for a
	// retry, each entity's events in the slice in commit order. A store
	// ranks the events by their place in their run, then by age, so that
	// no entity starves behind others with long backlogs. inFlight are
	// events this owner took and is still sending (not yet published or
	// failed): an entity of theirs has its run start after its last one
	// of them, and a store need not know them otherwise.
	DueRuns(ctx context.Context, owner string, limit int, inFlight []Event) ([]Event, error)
}

// PublishedRunStore is a [RunStore] that removes a batch's published
// events and reads the next batch in one call (one round trip of a
// database, rather than one for each). A [Relay]'s Run uses it, when its
// Store has it, for the work it does while a batch is being sent.
type PublishedRunStore interface {
	RunStore
	// PublishedDueRuns is [Store.Published] of published, then
	// [RunStore.DueRuns] of owner, limit and inFlight, which leaves out
	// the events published. On an error, neither took effect.
	PublishedDueRuns(ctx context.Context, owner string, limit int, published, inFlight []Event) ([]Event, error)
}

// Stats describes an outbox.
type Stats struct {
	// Pending counts events not yet published, dead ones excluded.
	Pending int
	// Oldest is the creation time of the oldest pending event (zero when
	// none).
	Oldest time.Time
	// Dead counts parked events; DeadEvents lists up to 100 of them.
	Dead       int
	DeadEvents []Event
}

// Partition maps an entity to one of n partitions.
func Partition(entity string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(entity))
	return int(h.Sum32() % uint32(n))
}
