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

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
