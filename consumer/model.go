package consumer

import (
	"time"

	"github.com/sqsonce/sqsonce/sqsmsg"
)

// The message model lives in package sqsmsg, which the dedupe and
// envelope middleware, the redrive tool and the Lambda adapter import
// without linking the consumer. Every name is re-exported here, so a
// consumer's code needs only this package: consumer.Message is
// sqsmsg.Message, and so on.

// AttrID is the message attribute that carries a message's dedupe id
// ([sqsmsg.AttrID]).
const AttrID = sqsmsg.AttrID

// AttrNotBefore is the message attribute that carries a message's
// not-before time; a message received before it is held
// ([sqsmsg.AttrNotBefore]).
const AttrNotBefore = sqsmsg.AttrNotBefore

// Message is one received SQS message ([sqsmsg.Message]).
type Message = sqsmsg.Message

// KeyFunc returns a message's dedupe id; "" means "use [DefaultKey]"
// ([sqsmsg.KeyFunc]).
type KeyFunc = sqsmsg.KeyFunc

// DefaultKey is the sqsonce-id message attribute when present, else the
// SQS MessageId ([sqsmsg.DefaultKey]).
func DefaultKey(m *Message) string { return sqsmsg.DefaultKey(m) }

// Handler handles one message ([sqsmsg.Handler]). A nil error acks it;
// see [Config.Classifier] for what other errors do.
type Handler = sqsmsg.Handler

// HandlerFunc adapts a function to [Handler] ([sqsmsg.HandlerFunc]).
type HandlerFunc = sqsmsg.HandlerFunc

// Middleware wraps a Handler ([sqsmsg.Middleware]). The first middleware
// of a list is outermost.
type Middleware = sqsmsg.Middleware

// Chain wraps h in mw, the first outermost ([sqsmsg.Chain]).
func Chain(h Handler, mw ...Middleware) Handler { return sqsmsg.Chain(h, mw...) }

// Sentinel errors ([sqsmsg.ErrDuplicate], [sqsmsg.ErrLeaseLost],
// [sqsmsg.ErrShutdown]).
var (
	// ErrDuplicate means the message's effect already happened (the dedupe
	// record is COMPLETED): the message is acked with outcome "duplicate".
	ErrDuplicate = sqsmsg.ErrDuplicate
	// ErrLeaseLost is the cause of a handler context cancelled because the
	// message's visibility (or dedupe lease) could not be extended.
	ErrLeaseLost = sqsmsg.ErrLeaseLost
	// ErrShutdown is the cause of a handler context cancelled because the
	// consumer's ShutdownTimeout passed; the message is released.
	ErrShutdown = sqsmsg.ErrShutdown
)

// PermanentError marks a failure that retrying cannot fix
// ([sqsmsg.PermanentError]).
type PermanentError = sqsmsg.PermanentError

// Permanent marks err as permanent: the message goes to the DLQ now, with
// err as its reason, and is never retried ([sqsmsg.Permanent]).
func Permanent(err error) error { return sqsmsg.Permanent(err) }

// RetryError asks for the message to be retried after Delay
// ([sqsmsg.RetryError]).
type RetryError = sqsmsg.RetryError

// RetryAfter asks for the message to be retried after d (its visibility is
// set to d, rounded up to whole seconds and capped at SQS's 12 hours)
// ([sqsmsg.RetryAfter]).
func RetryAfter(err error, d time.Duration) error { return sqsmsg.RetryAfter(err, d) }

// Outcome is how a received message ends ([sqsmsg.Outcome]).
type Outcome = sqsmsg.Outcome

// The outcomes ([sqsmsg.OutcomeAck] ...).
const (
	OutcomeAck        = sqsmsg.OutcomeAck
	OutcomeDuplicate  = sqsmsg.OutcomeDuplicate
	OutcomeRetry      = sqsmsg.OutcomeRetry
	OutcomeDeadLetter = sqsmsg.OutcomeDeadLetter
	OutcomeRelease    = sqsmsg.OutcomeRelease
	OutcomeHold       = sqsmsg.OutcomeHold
)

// Failure classes recorded in a dead letter's deadletter.Failure.Class
// ([sqsmsg.ClassPermanent] ...).
const (
	ClassPermanent   = sqsmsg.ClassPermanent   // the handler returned Permanent(err)
	ClassMaxAttempts = sqsmsg.ClassMaxAttempts // MaxAttempts transient failures
	ClassPanic       = sqsmsg.ClassPanic       // counted as a transient failure; a dead letter only via MaxAttempts
	ClassKeyReuse    = sqsmsg.ClassKeyReuse    // same dedupe key, different body
	// ClassOutcomeUnknown: a step's outcome outside the database is
	// unknown and its policy parks it (package step).
	ClassOutcomeUnknown = sqsmsg.ClassOutcomeUnknown
)

// Verdict is a classifier's decision for one handler error
// ([sqsmsg.Verdict]).
type Verdict = sqsmsg.Verdict

// Classifier maps a handler's error to a Verdict ([sqsmsg.Classifier]).
type Classifier = sqsmsg.Classifier

// ClassifierFunc adapts a function to [Classifier]
// ([sqsmsg.ClassifierFunc]).
type ClassifierFunc = sqsmsg.ClassifierFunc

// ClassifierChain returns a Classifier that asks each classifier in turn;
// the first that returns ok=true decides ([sqsmsg.ClassifierChain]). When
// none decides, the consumer's own classification decides with its
// Backoff and MaxAttempts (see [Config.Classifier]).
func ClassifierChain(cs ...Classifier) Classifier { return sqsmsg.ClassifierChain(cs...) }

// FailureClasser is implemented by errors that name their own dead-letter
// class ([sqsmsg.FailureClasser]).
type FailureClasser = sqsmsg.FailureClasser

// PanicError is the failure a recovered handler panic becomes
// ([sqsmsg.PanicError]).
type PanicError = sqsmsg.PanicError

// Result is what processing one message decided ([sqsmsg.Result]).
type Result = sqsmsg.Result

// Observer receives the consumer's metrics events ([sqsmsg.Observer]).
type Observer = sqsmsg.Observer

// NopObserver implements [Observer] with methods that do nothing
// ([sqsmsg.NopObserver]).
type NopObserver = sqsmsg.NopObserver

// Backoff is the retry policy for transient failures ([sqsmsg.Backoff]).
type Backoff = sqsmsg.Backoff

// Default backoff values ([sqsmsg.DefaultBackoffBase],
// [sqsmsg.DefaultBackoffCap]).
const (
	DefaultBackoffBase = sqsmsg.DefaultBackoffBase
	DefaultBackoffCap  = sqsmsg.DefaultBackoffCap
)

// SettledMessage is the message of the debug-level line logged once per
// settled message (see [Config.Logger]), for finding those lines.
const SettledMessage = "settled"
