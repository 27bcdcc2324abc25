package redrive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqserr"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// SQSAPI is the part of the SQS client the redrive tool uses.
type SQSAPI interface {
	ListQueues(ctx context.Context, in *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	CancelMessageMoveTask(ctx context.Context, in *sqs.CancelMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.CancelMessageMoveTaskOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Errors returned (wrapped) for bad input. Check them with errors.Is.
var (
	// ErrUnknownQueue: the queue does not exist (or is not visible to the
	// caller).
	ErrUnknownQueue = errors.New("redrive: unknown queue")
	// ErrKindMismatch: a standard queue's messages cannot go to a FIFO queue
	// (they have no group id), nor a FIFO queue's to a standard one (their
	// order would be lost).
	ErrKindMismatch = errors.New("redrive: queue kinds differ")
	// ErrNoDestination: no destination can be chosen for the move (the DLQ
	// has no source queue, or the destination is the DLQ itself); name the
	// destination explicitly.
	ErrNoDestination = errors.New("redrive: no destination")
	// ErrRefused: nothing a producer cannot forge says where a message of
	// the DLQ came from, or what does names a queue that is not a source of
	// the DLQ (see [MoveOptions.To] and [Summary.Refused]); it is left in
	// the DLQ.
	ErrRefused = errors.New("redrive: destination refused")
	// ErrBadRecord: an export file line is not a valid record.
	ErrBadRecord = errors.New("redrive: bad record")
)

// Config configures a [Redriver]. Only Client is required.
type Config struct {
	// Client is the SQS client. Required.
	Client SQSAPI
	// VisibilityTimeout is how long a received message stays hidden while
	// it is looked at, moved or held back (held messages are extended while
	// the command runs and made visible again when it ends). Defaults to 30s.
	VisibilityTimeout time.Duration
	// WaitTime is the long-poll wait of each receive. Defaults to 1s.
	WaitTime time.Duration
	// EmptyReceives is how many receives in a row that bring no new message
	// end a pass over a queue (a long poll asks every SQS server, and a pass
	// also waits for messages that SQS shows in flight but it does not
	// hold). Defaults to 1.
	EmptyReceives int
	// NowFunc returns the current time. Defaults to time.Now.
	NowFunc func() time.Time
	// Logger receives send, delete and release failures (warn) and one
	// line per batch (debug); never message bodies. Defaults to
	// zap.NewNop().
	Logger *zap.Logger
	// SigningKey verifies the signatures of failure records, made by
	// consumers with the same key (consumer.Config.DeadLetterSigningKey,
	// sqslambda.Config.DeadLetterSigningKey): a move without a destination
	// trusts the source queue a signed record names on a DLQ that several
	// queues share (see [MoveOptions.To]). At least 32 bytes. Defaults to
	// nil: no record is trusted on a shared DLQ.
	SigningKey []byte
	// MeterProvider receives the OpenTelemetry metrics of every move,
	// export and import (dry runs record nothing):
	// sqsonce.redrive.messages counts messages by result (moved, failed,
	// refused, skipped) and sqsonce.redrive.duration is each run's
	// duration; see docs/observability.md. Defaults to nil:
	// no metrics, at no cost.
	MeterProvider metric.MeterProvider
}

// Redriver moves messages out of dead-letter queues. Its methods are safe
// for concurrent use; each call does its own receives.
type Redriver struct {
	client  SQSAPI
	vis     time.Duration
	wait    time.Duration
	empties int
	now     func() time.Time
	key     []byte // nil: no failure record is attested
	log     *zap.Logger
	metrics *metrics // nil: off
}

// New returns a Redriver, filling Config's zero values with their defaults.
func New(cfg Config) (*Redriver, error) {
	if cfg.Client == nil {
		return nil, errors.New("redrive: Config.Client is required")
	}
	if cfg.VisibilityTimeout < 0 || cfg.VisibilityTimeout > sqslimits.MaxVisibility {
		return nil, fmt.Errorf("redrive: VisibilityTimeout %s is outside 0..12h", cfg.VisibilityTimeout)
	}
	if cfg.VisibilityTimeout != 0 && cfg.VisibilityTimeout < time.Second {
		return nil, fmt.Errorf("redrive: VisibilityTimeout %s is under SQS's 1s granularity", cfg.VisibilityTimeout)
	}
	if cfg.WaitTime < 0 || cfg.WaitTime > sqslimits.MaxWaitTime {
		return nil, fmt.Errorf("redrive: WaitTime %s is outside 0..20s", cfg.WaitTime)
	}
	if len(cfg.SigningKey) > 0 {
		if err := deadletter.CheckSigningKey(cfg.SigningKey); err != nil {
			return nil, fmt.Errorf("redrive: SigningKey: %w", err)
		}
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Redriver{
		key:     cfg.SigningKey,
		client:  cfg.Client,
		vis:     cmp.Or(cfg.VisibilityTimeout, 30*time.Second),
		wait:    cmp.Or(cfg.WaitTime, time.Second),
		empties: max(1, cfg.EmptyReceives),
		now:     cfg.NowFunc,
		log:     cmp.Or(cfg.Logger, zap.NewNop()),
		metrics: newMetrics(cfg.MeterProvider),
	}, nil
}

// VisibilityTimeout returns how long a message the Redriver looks at stays
// hidden at most once it lets go of it, or stops (see
// [Config.VisibilityTimeout]).
func (r *Redriver) VisibilityTimeout() time.Duration { return r.vis }

// Queue is a resolved queue.
type Queue struct {
	// URL is the queue URL. It is only ever a parameter of requests; the
	// endpoint comes from the client's configuration, never from its host.
	URL string `json:"url"`
	// Name is the queue name.
	Name string `json:"name"`
	// ARN is the queue ARN.
	ARN string `json:"arn"`
	// FIFO reports a FIFO queue.
	FIFO bool `json:"fifo"`
	// DeadLetterTargetARN is the DLQ of this queue's RedrivePolicy, if any.
	DeadLetterTargetARN string `json:"dead_letter_target_arn,omitempty"`
	// Messages and InFlight are ApproximateNumberOfMessages and
	// ApproximateNumberOfMessagesNotVisible when the queue was resolved;
	// -1 when SQS returned something that is not a count (unknown, never
	// taken as 0).
	Messages int `json:"messages"`
	// InFlight: see Messages.
	InFlight int `json:"in_flight"`
	// Delayed is ApproximateNumberOfMessagesDelayed (see Messages).
	Delayed int `json:"delayed"`
}

// queueAttrs are the attributes Queue reads.
var queueAttrs = []types.QueueAttributeName{
	types.QueueAttributeNameQueueArn,
	types.QueueAttributeNameFifoQueue,
	types.QueueAttributeNameRedrivePolicy,
	types.QueueAttributeNameApproximateNumberOfMessages,
	types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
}

// Queue resolves a queue by name, URL or ARN. A URL is read for its
// account and name only: the queue's URL is asked of the configured endpoint (its host
// is never contacted). A queue that does not exist gives an error wrapping
// [ErrUnknownQueue].
func (r *Redriver) Queue(ctx context.Context, nameOrURL string) (Queue, error) {
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(nameOrURL)}
	if strings.Contains(nameOrURL, "://") {
		account, name, ok := urlAccountName(nameOrURL)
		if !ok {
			return Queue{}, fmt.Errorf("%w: %q is not a queue URL (want https://HOST/ACCOUNT/NAME)", ErrUnknownQueue, nameOrURL)
		}
		in = &sqs.GetQueueUrlInput{QueueName: aws.String(name), QueueOwnerAWSAccountId: aws.String(account)}
	} else if arn, ok := parseQueueARN(nameOrURL); ok {
		in = &sqs.GetQueueUrlInput{QueueName: aws.String(arn.Name), QueueOwnerAWSAccountId: aws.String(arn.Account)}
	} else if nameOrURL == "" || strings.ContainsAny(nameOrURL, "/:") {
		return Queue{}, fmt.Errorf("%w: %q is not a queue name, URL or ARN", ErrUnknownQueue, nameOrURL)
	}
	out, err := r.client.GetQueueUrl(ctx, in)
	if err != nil {
		if sqserr.QueueMissing(err) {
			return Queue{}, fmt.Errorf("%w: %s", ErrUnknownQueue, nameOrURL)
		}
		return Queue{}, fmt.Errorf("redrive: get queue url %s: %w", nameOrURL, err)
	}
	q, err := r.describe(ctx, aws.ToString(out.QueueUrl))
	if err != nil && sqserr.QueueMissing(err) {
		return Queue{}, fmt.Errorf("%w: %s", ErrUnknownQueue, nameOrURL)
	}
	return q, err
}

// queueARN is a parsed SQS queue ARN: arn:PARTITION:sqs:REGION:ACCOUNT:NAME.
type queueARN struct {
	Partition, Region, Account, Name string
}

// parseQueueARN parses an SQS queue ARN; ok is false for anything else.
func parseQueueARN(s string) (queueARN, bool) {
	p := strings.Split(s, ":")
	if len(p) != 6 || p[0] != "arn" || p[1] == "" || p[2] != "sqs" || p[3] == "" || p[4] == "" || p[5] == "" {
		return queueARN{}, false
	}
	return queueARN{Partition: p[1], Region: p[3], Account: p[4], Name: p[5]}, true
}

// urlAccountName reads the account and name of a queue URL
// (SCHEME://HOST/ACCOUNT/NAME).
func urlAccountName(s string) (account, name string, ok bool) {
	if !strings.Contains(s, "://") {
		return "", "", false
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// describe reads a queue's attributes.
func (r *Redriver) describe(ctx context.Context, queueURL string) (Queue, error) {
	out, err := r.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: queueAttrs})
	if err != nil {
		return Queue{}, fmt.Errorf("redrive: queue attributes %s: %w", queueURL, err)
	}
	return queueFrom(queueURL, out.Attributes), nil
}

// queueFrom builds a Queue from its URL and attributes.
func queueFrom(queueURL string, a map[string]string) Queue {
	q := Queue{URL: queueURL, Name: nameOf(queueURL), ARN: a[string(types.QueueAttributeNameQueueArn)]}
	q.FIFO = a[string(types.QueueAttributeNameFifoQueue)] == "true" || strings.HasSuffix(q.Name, ".fifo")
	q.Messages = countOrUnknown(a[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	q.InFlight = countOrUnknown(a[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	q.Delayed = countOrUnknown(a[string(types.QueueAttributeNameApproximateNumberOfMessagesDelayed)])
	q.DeadLetterTargetARN = targetARN(a[string(types.QueueAttributeNameRedrivePolicy)])
	return q
}

// approxCount parses an approximate message count SQS returns. ok is false
// for a value that is present and not a non-negative integer: such a count
// is unknown, and taking it as 0 would make a queue look empty. An absent
// value (not asked for) is 0.
func approxCount(s string) (n int, ok bool) {
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// countOrUnknown is approxCount with -1 for unknown (see [Queue.Messages]).
func countOrUnknown(s string) int {
	if n, ok := approxCount(s); ok {
		return n
	}
	return -1
}

// expected returns how many messages a command over q expects to see for
// its progress reports, capped by limit (0: none); 0 means unknown.
func expected(q Queue, limit int) int {
	total := 0
	if q.Messages >= 0 && q.InFlight >= 0 {
		total = q.Messages + q.InFlight
	}
	if limit > 0 && (total == 0 || limit < total) {
		total = limit
	}
	return total
}

// nameOf returns the last path segment of a queue URL.
func nameOf(queueURL string) string {
	if u, err := url.Parse(queueURL); err == nil && u.Path != "" {
		return u.Path[strings.LastIndex(u.Path, "/")+1:]
	}
	return queueURL[strings.LastIndex(queueURL, "/")+1:]
}

// isUnsupported reports an error that means the server does not implement
// the call (emulators, some regions), as opposed to a failure of the call.
func isUnsupported(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation",
			"InvalidAction", "UnknownOperation", "UnknownOperationException",
			"NotImplemented", "NotImplementedException":
			return true
		}
	}
	return false
}
