package sqsfake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// Limits SQS documents, enforced by the fake.
const (
	maxBatchEntries    = sqslimits.MaxBatchEntries
	maxBatchPayload    = sqslimits.MaxMessageBytes // total bytes of a SendMessageBatch
	maxVisibility      = sqslimits.MaxVisibility
	dedupeWindow       = 5 * time.Minute
	attemptWindow      = 5 * time.Minute
	maxMessageAttrs    = sqslimits.MaxMessageAttributes
	maxWaitTimeSeconds = sqslimits.MaxWaitTimeSeconds
	purgeInterval      = 60 * time.Second
)

// Fake is an in-process SQS service holding any number of queues. It
// implements the SQS client methods sqsonce uses, with the semantics AWS
// documents. Its clock is time.Now and every wait happens inside the call,
// so it works inside testing/synctest bubbles. The zero value is not usable:
// call New.
type Fake struct {
	region, account string

	mu       sync.Mutex
	queues   map[string]*queue // by URL
	order    []string          // queue URLs in creation order
	seq      int64
	calls    map[string]int
	problems []string
	visLog   []VisibilityChange
	notify   chan struct{}
	hook     func(op string, in any) Fault
}

// Option configures a Fake.
type Option func(*Fake)

// WithRegion sets the region in queue URLs and ARNs. Defaults to us-east-1.
func WithRegion(region string) Option { return func(f *Fake) { f.region = region } }

// WithAccount sets the account id in queue URLs and ARNs. Defaults to
// 123456789012.
func WithAccount(account string) Option { return func(f *Fake) { f.account = account } }

// New returns an empty Fake.
func New(opts ...Option) *Fake {
	f := &Fake{
		region:  "us-east-1",
		account: "123456789012",
		queues:  map[string]*queue{},
		calls:   map[string]int{},
		notify:  make(chan struct{}),
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Fault is what an injection hook asks of one call. The zero Fault lets the
// call run normally.
type Fault struct {
	// Delay holds the call this long before it runs (or until its context
	// is done, in which case the call is not applied).
	Delay time.Duration
	// Err, if set, is returned and the call is not applied.
	Err error
	// LoseResponse applies the call, then returns an error wrapping
	// ErrResponseLost instead of the response, like a connection reset
	// after the server answered.
	LoseResponse bool
	// ResponseDelay applies the call, then holds its response this long,
	// like a response still in transit. If the caller's context is done
	// first, the caller gets its error and the response is lost: the call
	// stays applied (a ReceiveMessage's messages stay in flight).
	ResponseDelay time.Duration
	// PollOutlivesCaller (ReceiveMessage only): when the caller's context
	// ends during the long poll, the caller gets its error but the poll
	// goes on, as SQS's does after a client disconnects: messages that
	// become visible before its wait ends are taken (in flight for their
	// visibility timeout) and the response is lost.
	PollOutlivesCaller bool
	// FailEntries makes the batch entries with these ids fail with the given
	// error code (in the output's Failed, SenderFault false); they are not
	// applied. Ignored by calls that are not batches.
	FailEntries map[string]string
}

// ErrResponseLost is wrapped by the error of a call whose response a Fault
// lost: the call was applied.
var ErrResponseLost = errors.New("sqsfake: connection reset after the request was applied")

// Inject installs hook, called before every SQS call (outside the fake's
// lock, so it may call the introspection methods) with the operation name
// ("ReceiveMessage", "DeleteMessageBatch", ...) and the call's input. A nil
// hook removes it.
func (f *Fake) Inject(hook func(op string, in any) Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = hook
}

// FailNext makes the next n calls of op fail with err (not applied) and is
// a shorthand for a counting Inject hook; it replaces any installed hook.
func (f *Fake) FailNext(op string, n int, err error) {
	var mu sync.Mutex
	f.Inject(func(o string, _ any) Fault {
		mu.Lock()
		defer mu.Unlock()
		if o != op || n == 0 {
			return Fault{}
		}
		n--
		return Fault{Err: err}
	})
}

// begin counts the call, runs the hook and its delay. A non-nil error means
// the call must not be applied.
func (f *Fake) begin(ctx context.Context, op string, in any) (Fault, error) {
	f.mu.Lock()
	f.calls[op]++
	hook := f.hook
	f.mu.Unlock()
	var ft Fault
	if hook != nil {
		ft = hook(op, in)
	}
	if ft.Delay > 0 {
		t := time.NewTimer(ft.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ft, opError(op, ctx.Err())
		case <-t.C:
		}
	}
	if ft.Err != nil {
		return ft, opError(op, ft.Err)
	}
	if err := ctx.Err(); err != nil {
		return ft, opError(op, err)
	}
	return ft, nil
}

// finish applies a LoseResponse or ResponseDelay fault to a call's result.
func finish[T any](ctx context.Context, op string, ft Fault, out T, err error) (T, error) {
	if ft.ResponseDelay > 0 {
		t := time.NewTimer(ft.ResponseDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			var zero T
			return zero, opError(op, ctx.Err())
		case <-t.C:
		}
	}
	if ft.LoseResponse {
		var zero T
		return zero, opError(op, ErrResponseLost)
	}
	if err != nil {
		var zero T
		return zero, opError(op, err)
	}
	return out, nil
}

// opError wraps err as the SDK does, so errors.As and smithy.APIError
// checks behave as with the real client.
func opError(op string, err error) error {
	return &smithy.OperationError{ServiceID: "SQS", OperationName: op, Err: err}
}

// wake tells long polls that something changed. Callers hold f.mu.
func (f *Fake) wake() {
	close(f.notify)
	f.notify = make(chan struct{})
}

func (f *Fake) problem(format string, args ...any) {
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

func (f *Fake) nextSeq() int64 {
	f.seq++
	return f.seq
}

// queueByURL returns the queue or a QueueDoesNotExist error. Callers hold f.mu.
func (f *Fake) queueByURL(url *string) (*queue, error) {
	q := f.queues[aws.ToString(url)]
	if q == nil {
		return nil, &types.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	return q, nil
}

// invalidParameter is SQS's InvalidParameterValue, for which the SDK has no type.
func invalidParameter(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

func missingParameter(name string) error {
	return &smithy.GenericAPIError{Code: "MissingParameter", Message: "The request must contain the parameter " + name + ".", Fault: smithy.FaultClient}
}
