package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/zap"

	engine "github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// SQSAPI is the one SQS call a Keeper makes. *sqs.Client satisfies it.
type SQSAPI interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// The reasons a lost channel gives, besides a [*RefusedError].
var (
	// ErrMaxVisibility: the handle reached SQS's limit of 12 hours of
	// visibility counted from the receive, and cannot be kept invisible
	// any longer. The message becomes visible when its last extension
	// runs out.
	ErrMaxVisibility = errors.New("heartbeat: the 12-hour visibility limit was reached")
	// ErrExpired: the visibility ran out before an extension succeeded
	// (the calls failed, or Run was not running), so the message may
	// already be with another consumer.
	ErrExpired = errors.New("heartbeat: the visibility ran out before it could be extended")
)

// RefusedError is an extension SQS refused for one handle: the message was
// deleted, its visibility was changed or ran out, or the handle is not one
// SQS issued.
type RefusedError struct {
	// Code is SQS's error code, for example ReceiptHandleIsInvalid or
	// MessageNotInflight.
	Code string
	// Message is SQS's text for it.
	Message string
}

// Error returns the refusal with SQS's code and text.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("heartbeat: SQS refused the extension: %s: %q", e.Code, e.Message)
}

// receiveMargin is how much earlier than the receivedAt passed to Add the
// Keeper counts SQS's 12 hours from: SQS counts them from the moment it
// picked the message, which is some time before the receive's response
// is read.
const receiveMargin = time.Minute

// Config configures a Keeper.
type Config struct {
	// Client makes the ChangeMessageVisibilityBatch calls, usually the
	// *sqs.Client the messages are received with. Required.
	Client SQSAPI

	// QueueURL is the URL of the queue the receipt handles come from.
	// Required.
	QueueURL string

	// Visibility is the visibility timeout the messages are received with:
	// the queue's VisibilityTimeout attribute, or the VisibilityTimeout of
	// the ReceiveMessage call when it sets one. Each extension asks SQS for
	// this much again. A whole number of seconds from 1s to 12h. Required.
	Visibility time.Duration

	// Interval is the time between two looks for handles to extend. A
	// handle is extended by the look that finds it within two intervals
	// of running out. Must be shorter than Visibility.
	//
	// Defaults to Visibility/3.
	Interval time.Duration

	// Logger logs extension calls that failed, at warn level, with the
	// number of handles (never the handles). Defaults to a no-op logger.
	Logger *zap.Logger
}

// validate reports the first setting of cfg that is wrong.
func (cfg Config) validate() error {
	switch {
	case cfg.Client == nil:
		return errors.New("heartbeat: Config.Client is required: set it to the *sqs.Client the messages are received with")
	case cfg.QueueURL == "":
		return errors.New("heartbeat: Config.QueueURL is required: set it to the URL of the queue the messages are received from")
	case cfg.Visibility == 0:
		return errors.New("heartbeat: Config.Visibility is required: set it to the visibility timeout the messages are received with (the queue's VisibilityTimeout attribute)")
	case cfg.Visibility < time.Second || cfg.Visibility > sqslimits.MaxVisibility || cfg.Visibility%time.Second != 0:
		return fmt.Errorf("heartbeat: Config.Visibility is %s: it must be a whole number of seconds from 1s to 12h", cfg.Visibility)
	case cfg.Interval < 0 || cfg.Interval >= cfg.Visibility:
		return fmt.Errorf("heartbeat: Config.Interval is %s: it must be positive and shorter than Visibility (%s), or zero for Visibility/3", cfg.Interval, cfg.Visibility)
	}
	return nil
}

// Keeper keeps the receipt handles of one queue invisible while their
// messages are worked on: [Keeper.Run] extends every handle added with
// [Keeper.Add] that is about to run out, in ChangeMessageVisibilityBatch
// calls of up to 10 handles, and never past SQS's 12 hours from the
// receive. A Keeper is safe for concurrent use.
type Keeper struct {
	hb      *engine.Heartbeat
	running atomic.Bool
}

// New checks cfg, fills its defaults and returns a Keeper. Call
// [Keeper.Run] to start extending.
func New(cfg Config) (*Keeper, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	hb, err := engine.New(engine.Config{
		Client:     cfg.Client,
		QueueURL:   cfg.QueueURL,
		Visibility: cfg.Visibility,
		Interval:   cfg.Interval, // zero: the engine's Visibility/3
		Logger:     cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Keeper{hb: hb}, nil
}

// Run extends the handles the Keeper holds until ctx is cancelled, then
// returns nil once every goroutine it started has returned; a call in
// flight is cut short. Handles added before Run are kept from its first
// look. After Run returns, the handles still held are not extended (nor
// reported lost) until Run is called again. A Keeper runs at most once at
// a time: a second call while one runs returns an error.
func (k *Keeper) Run(ctx context.Context) error {
	if !k.running.CompareAndSwap(false, true) {
		return errors.New("heartbeat: Run called while already running")
	}
	defer k.running.Store(false)
	_ = k.hb.Run(ctx) // ctx's error: cancelled is how Run is asked to stop
	return nil
}

// Add starts keeping receiptHandle invisible. receivedAt is when the
// ReceiveMessage call that returned it came back (time.Now() right after
// the call; the zero time means now): the visibility is counted from it,
// SQS's 12 hours from a minute before it.
//
// The channel returned receives one error, and only one, if the Keeper
// can no longer keep the handle invisible; the handle is then no longer
// held and the message may be, or soon be, with another consumer: stop
// its work and do not count on deleting it. The error is [ErrMaxVisibility]
// (the 12 hours are up), [ErrExpired] (the visibility ran out before an
// extension succeeded) or a [*RefusedError] (SQS refused the extension,
// with its code). The channel is never closed, and receives nothing while
// the handle is kept nor once [Keeper.Remove] returned true for it. Add of
// a handle the Keeper already holds starts it afresh; the earlier channel
// then receives nothing.
func (k *Keeper) Add(receiptHandle string, receivedAt time.Time) <-chan error {
	if receivedAt.IsZero() {
		receivedAt = time.Now()
	}
	lost := make(chan error, 1)
	// The engine calls this at most once per Add, so the send never blocks.
	k.hb.AddReceived(receiptHandle, receivedAt.Add(-receiveMargin), receivedAt, func(err error) { lost <- reason(err) })
	return lost
}

// Remove stops keeping receiptHandle invisible, and reports whether the
// Keeper still held it: false when the handle was never added, was
// already removed, or was lost (its channel then has, or is about to
// have, the reason). Call it before deleting the message or changing its
// visibility yourself. Remove returns at once: it does not wait for an
// extension call already sent, so one sent just before may still land
// after it (a delete is not affected; a visibility you set right after
// Remove may be replaced by one last extension).
func (k *Keeper) Remove(receiptHandle string) bool {
	return k.hb.Remove(receiptHandle)
}

// reason turns the engine's error for a lost handle into this package's.
func reason(err error) error {
	var refused *engine.EntryError
	switch {
	case errors.Is(err, engine.ErrMaxVisibility):
		return ErrMaxVisibility
	case errors.Is(err, engine.ErrExpired):
		return ErrExpired
	case errors.As(err, &refused):
		return &RefusedError{Code: refused.Code, Message: refused.Message}
	}
	return err
}
