package sqsmsg

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Handler handles one message. A nil error acks it; see [Classifier] for
// what other errors do.
type Handler interface {
	Handle(ctx context.Context, msg *Message) error
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, msg *Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, msg *Message) error { return f(ctx, msg) }

// Middleware wraps a Handler. The first middleware of a list is outermost.
type Middleware func(Handler) Handler

// Chain wraps h in mw, the first outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Sentinel errors.
var (
	// ErrDuplicate means the message's effect already happened (the dedupe
	// record is COMPLETED): the message is acked with outcome "duplicate".
	ErrDuplicate = errors.New("consumer: duplicate: already completed")
	// ErrLeaseLost is the cause of a handler context cancelled because the
	// message's visibility (or dedupe lease) could not be extended.
	ErrLeaseLost = errors.New("consumer: lease lost")
	// ErrShutdown is the cause of a handler context cancelled because the
	// consumer's ShutdownTimeout passed; the message is released.
	ErrShutdown = errors.New("consumer: shutdown")
)

// PermanentError marks a failure that retrying cannot fix: the message is
// dead-lettered at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + errString(e.Err) }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent: the message goes to the DLQ now, with
// err as its reason, and is never retried.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &PermanentError{Err: err}
}

// RetryError asks for the message to be retried after Delay.
type RetryError struct {
	Err   error
	Delay time.Duration
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("retry after %s: %s", e.Delay, errString(e.Err))
}
func (e *RetryError) Unwrap() error { return e.Err }

// RetryAfter asks for the message to be retried after d (its visibility is
// set to d, rounded up to whole seconds and capped at SQS's 12 hours).
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &RetryError{Err: err, Delay: d}
}

// UnavailableError says that the downstream a handler calls (a payment
// API, a partner's endpoint, a database at its connection limit) is
// unavailable: down, or asking its callers to slow down. Return it with
// [Unavailable].
type UnavailableError struct {
	Err error
	// RetryAfter is when the downstream said to come back (an HTTP
	// Retry-After), 0 when it did not say.
	RetryAfter time.Duration
	// RateLimited says the downstream asked to slow down (an HTTP 429),
	// rather than that it is down: see [RateLimited].
	RateLimited bool
}

func (e *UnavailableError) Error() string {
	what := "unavailable"
	if e.RateLimited {
		what = "rate limited"
	}
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s, retry after %s: %s", what, e.RetryAfter, errString(e.Err))
	}
	return what + ": " + errString(e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable says that the downstream the handler calls is unavailable
// (an HTTP 503 or 429, say), and when it said to come back (its
// Retry-After; 0 when it did not say). The failure is not the message's:
// the message is retried after retryAfter, or after the consumer's pause
// when that is longer, never dead-lettered for it, and the receive does
// not count as an attempt toward MaxAttempts. The consumer pauses (see
// consumer.BackPressure): it stops receiving, keeps the messages it holds
// invisible without running them, and after the pause runs one message
// as a probe before it returns to full speed. The Lambda adapter, which
// cannot pause, does not start the batch's other records either: they
// come back after the same delay.
func Unavailable(err error, retryAfter time.Duration) error {
	if err == nil {
		err = errors.New("downstream unavailable")
	}
	return &UnavailableError{Err: err, RetryAfter: max(retryAfter, 0)}
}

// RateLimited says that the downstream the handler calls asks its callers
// to slow down (an HTTP 429), and when to come back (its Retry-After; 0
// when it did not say). It is [Unavailable] (the message is retried after
// retryAfter and the consumer pauses) with a mark: with
// consumer.Limits.Adaptive on, the consumer also lowers its rate.
func RateLimited(err error, retryAfter time.Duration) error {
	if err == nil {
		err = errors.New("downstream rate limit")
	}
	return &UnavailableError{Err: err, RetryAfter: max(retryAfter, 0), RateLimited: true}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
