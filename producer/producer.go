package producer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqserr"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// AttrID is the message attribute that carries a message's dedupe id; the
// consumer's default KeyFunc reads it.
const AttrID = "sqsonce-id"

// SQS's limits on what one send may carry.
const (
	// MaxBatchEntries is the most entries one SendMessageBatch takes.
	MaxBatchEntries = sqslimits.MaxBatchEntries
	// MaxMessageBytes is SQS's largest message (body plus attribute names,
	// types and values), and also the largest SendMessageBatch payload. A
	// queue's MaximumMessageSize may be lower.
	MaxMessageBytes = sqslimits.MaxMessageBytes
	// MinMessageBytes is the lowest MaximumMessageSize a queue can have.
	MinMessageBytes = 1024
	// MaxMessageAttributes is the most message attributes one message carries.
	MaxMessageAttributes = sqslimits.MaxMessageAttributes
	// MaxGroupIDLength is the longest MessageGroupId SQS takes.
	MaxGroupIDLength = 128
)

var (
	// ErrInvalid is matched (errors.Is) by the error of a message that can
	// never be sent as it is, so it is not retried: too large for the
	// queue or topic ([ErrTooLarge]), without a group on a FIFO queue or
	// topic ([ErrNoGroup]), with a group id, subject or body characters
	// SQS or SNS refuses, or refused by SQS or SNS as the sender's fault
	// ([EntryError] with SenderFault and a code about the message, not
	// about access, keys, throttling or the queue or topic).
	ErrInvalid = errors.New("producer: the message cannot be sent as it is")
	// ErrTooLarge is the error of a message over the queue's (or topic's)
	// MaximumMessageSize, counting the body and every attribute as SQS and
	// SNS do, or with more than [MaxMessageAttributes] attributes; it is
	// never sent.
	ErrTooLarge = errors.New("producer: message too large")
	// ErrGroupBlocked is the error of a FIFO message not sent because an
	// earlier message of its group failed: sending it would break the
	// group's order.
	ErrGroupBlocked = errors.New("producer: an earlier message of the group failed")
	// ErrNoGroup is the error of a message without a GroupID on a FIFO
	// queue or topic.
	ErrNoGroup = errors.New("producer: a FIFO queue or topic needs a GroupID")
)

// SQSAPI is the part of the SQS client a Producer uses. *sqs.Client
// satisfies it. GetQueueAttributes reads the queue's MaximumMessageSize,
// once, unless Config.MaxMessageBytes is set.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Config configures a Producer. Client and QueueURL are required.
type Config struct {
	// Client sends the messages. Required.
	Client SQSAPI
	// QueueURL is the queue sent to. Required.
	QueueURL string
	// FIFO says the queue is a FIFO queue. Defaults to whether QueueURL ends
	// in ".fifo".
	FIFO *bool
	// MaxMessageBytes is the largest message the queue takes (its
	// MaximumMessageSize, 1024 to [MaxMessageBytes]): a larger one fails
	// with [ErrTooLarge] without being sent. Defaults to reading the
	// queue's MaximumMessageSize with GetQueueAttributes, once, at the
	// first send (which then needs sqs:GetQueueAttributes); set it to make
	// no such call.
	MaxMessageBytes int
	// NewIDFunc makes the sqsonce-id of a message sent without one.
	// Defaults to a UUIDv7 (time-ordered, random).
	NewIDFunc func() string
	// MaxAttempts is how many times a message is sent before its failure is
	// returned (a message SQS refuses as the sender's fault is not retried:
	// see [ErrInvalid]). Defaults to 5.
	MaxAttempts int
	// BackoffBase and BackoffMax bound the full-jitter wait between
	// attempts. Default to 100ms and 5s.
	BackoffBase, BackoffMax time.Duration
	// Concurrency is how many SendMessageBatch calls run at once on a
	// standard queue. FIFO queues send one call at a time, so that each
	// group keeps its order. Defaults to 4.
	Concurrency int
	// Logger receives one warning per failed message (its id and the
	// reason, never the body). Defaults to zap.NewNop().
	Logger *zap.Logger
	// NoTraceContext stops the producer from adding the W3C trace context
	// (traceparent, tracestate attributes) of the ctx passed to Send and
	// SendBatch. By default it is added whenever ctx carries a span and the
	// message has room for it under SQS's 10 attributes and the queue's
	// MaximumMessageSize: the message's own attributes always win, the
	// trace context is what is left out. (The AWSTraceHeader system
	// attribute, X-Ray's, is not set.)
	NoTraceContext bool
	// Payload stores bodies too large for the queue in S3 and compresses
	// bodies (see [PayloadConfig]). Defaults to neither: a message too
	// large for the queue fails with ErrTooLarge.
	Payload PayloadConfig
	// DelayHop is for tests: the longest DelaySeconds a message with a
	// NotBefore is sent with (a consumer holds it the rest of the way),
	// so that a test sees its hops in seconds. Defaults to 15 minutes,
	// SQS's most.
	DelayHop time.Duration
}

// Message is one message to send.
type Message struct {
	// ID is the message's sqsonce-id: the job's identity, made when the
	// job was made, so that a re-send is recognised downstream. Empty
	// means a new one from Config.NewIDFunc.
	ID string
	// Body is the message body. Required; only the characters SQS allows
	// (#x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD, #x10000 to
	// #x10FFFF, in valid UTF-8).
	Body string
	// Attributes are sent as they are, plus sqsonce-id.
	Attributes map[string]types.MessageAttributeValue
	// GroupID is the MessageGroupId; required on a FIFO queue, where it is
	// 1 to 128 characters, each a letter, a digit or one of
	// !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~.
	GroupID string
	// DeduplicationID is the MessageDeduplicationId on a FIFO queue.
	// Defaults to the sqsonce-id, so that SQS drops a re-send within its
	// 5-minute window; set it to send a deliberate copy.
	DeduplicationID string
	// Delay postpones delivery (standard queues only; whole seconds up to
	// 15 minutes).
	Delay time.Duration
	// NotBefore, when set, is the time before which the message must not
	// run: any time within the queue's MessageRetentionPeriod (less a
	// minute), read once with GetQueueAttributes; a later one fails with
	// [ErrBeyondRetention]. SQS delays it as long as it can (15 minutes),
	// and a consumer built with sqsonce (the consumer, the Lambda adapter)
	// holds it the rest of the way by SQS's own means, then runs it at
	// its time with its body, attributes and id as sent. It travels in
	// [AttrNotBefore] (one of the 10 attributes; the message is sized
	// with the attribute as long as a re-sent copy carries it). Standard
	// queues only: SQS takes no per-message delay on a FIFO queue, where
	// it is refused ([ErrInvalid]). Not with Delay. A time already past
	// sends the message at once, as a plain one. See "Delays beyond 15
	// minutes" in the README.
	NotBefore time.Time
}

// Result is what happened to one message, at the same index as the
// message in [Producer.SendBatch] or [Publisher.PublishBatch].
type Result struct {
	// ID is the sqsonce-id the message was sent with.
	ID string
	// MessageID is SQS's (or SNS's) id for the sent message (empty if
	// not sent).
	MessageID string
	// SequenceNumber is set on FIFO queues and topics.
	SequenceNumber string
	// Attempts is how many times the message was sent.
	Attempts int
	// Err is nil when SQS accepted the message.
	Err error
}

// Producer sends messages stamped with sqsonce-id, in SendMessageBatch
// calls within SQS's limits, retrying failed entries with backoff.
type Producer struct {
	cfg  Config
	fifo bool
	send sender

	limitMu   sync.Mutex
	limit     int           // the largest message the queue takes; 0 until read
	retention time.Duration // the queue's MessageRetentionPeriod; 0 until read
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Producer, error) {
	if cfg.Client == nil {
		return nil, errors.New("producer: Config.Client is required")
	}
	if cfg.QueueURL == "" {
		return nil, errors.New("producer: Config.QueueURL is required")
	}
	if cfg.MaxAttempts < 0 || cfg.Concurrency < 0 || cfg.BackoffBase < 0 || cfg.BackoffMax < 0 {
		return nil, errors.New("producer: MaxAttempts, Concurrency and the backoff bounds must not be negative")
	}
	if cfg.DelayHop < 0 || cfg.DelayHop%time.Second != 0 {
		return nil, errors.New("producer: Config.DelayHop must be whole seconds (0 for 15 minutes)")
	}
	if cfg.MaxMessageBytes != 0 && (cfg.MaxMessageBytes < MinMessageBytes || cfg.MaxMessageBytes > MaxMessageBytes) {
		return nil, fmt.Errorf("producer: Config.MaxMessageBytes must be the queue's MaximumMessageSize, %d to %d (or 0 to read it from the queue)", MinMessageBytes, MaxMessageBytes)
	}
	if err := cfg.Payload.check(); err != nil {
		return nil, err
	}
	fifo := strings.HasSuffix(cfg.QueueURL, ".fifo")
	if cfg.FIFO != nil {
		fifo = *cfg.FIFO
	}
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = newID
	}
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 5)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, 100*time.Millisecond)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, 5*time.Second)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 4)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Producer{cfg: cfg, fifo: fifo, limit: cfg.MaxMessageBytes, send: sender{
		fifo: fifo, maxAttempts: cfg.MaxAttempts, backoffBase: cfg.BackoffBase, backoffMax: cfg.BackoffMax,
		concurrency: cfg.Concurrency, callBytes: MaxMessageBytes,
	}}, nil
}

// MaxMessageBytes returns the largest message the queue takes:
// Config.MaxMessageBytes, else the queue's MaximumMessageSize, read with
// GetQueueAttributes on the first call that needs it and kept. An error
// (the call failed) is not kept: the next call tries again.
func (p *Producer) MaxMessageBytes(ctx context.Context) (int, error) {
	p.limitMu.Lock()
	defer p.limitMu.Unlock()
	if p.limit > 0 {
		return p.limit, nil
	}
	out, err := p.cfg.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.cfg.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize, types.QueueAttributeNameMessageRetentionPeriod},
	}, sdkhttp.SQS)
	if err != nil {
		return 0, fmt.Errorf("producer: read the queue's MaximumMessageSize (allow sqs:GetQueueAttributes, or set Config.MaxMessageBytes): %w", err)
	}
	if p.retention == 0 {
		_ = p.keepRetention(out.Attributes) // read here for a NotBefore, else when one needs it
	}
	raw := out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)]
	n, err := strconv.Atoi(raw)
	if err != nil || n < MinMessageBytes {
		return 0, fmt.Errorf("producer: the queue's MaximumMessageSize is %q, not a size of at least %d bytes (set Config.MaxMessageBytes)", raw, MinMessageBytes)
	}
	p.limit = min(n, MaxMessageBytes)
	return p.limit, nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// Send sends one message and returns its result; the error is Result.Err.
func (p *Producer) Send(ctx context.Context, m Message) (Result, error) {
	r := p.SendBatch(ctx, []Message{m})[0]
	return r, r.Err
}

// SendBatch sends msgs in as few SendMessageBatch calls as SQS's limits
// allow (10 entries, 1 MiB a call) and returns one Result per message, in
// order. A message is retried until it is accepted, it cannot be sent as
// it is ([ErrInvalid]: checked before sending where the producer can, else
// refused by SQS as the sender's fault), MaxAttempts is reached or ctx
// ends. When the queue's MaximumMessageSize cannot be read (see
// [Producer.MaxMessageBytes]) nothing is sent and every Result has that
// error. On a FIFO
// queue MessageDeduplicationId is the sqsonce-id (so a retry after a lost
// response is not enqueued twice), calls go one at a time in the order of
// msgs with at most one message of each group per call, and once a message
// of a group fails the group's later messages are not sent
// (ErrGroupBlocked). A single busy group therefore sends one message per
// call; spread work over groups (an entity each) for throughput.
func (p *Producer) SendBatch(ctx context.Context, msgs []Message) []Result {
	results := make([]Result, len(msgs))
	msgs = slices.Clone(msgs) // trace context is added to the copies
	for i, m := range msgs {
		results[i].ID = m.ID
		if m.ID == "" {
			results[i].ID = p.cfg.NewIDFunc()
		}
	}
	limit, err := p.MaxMessageBytes(ctx)
	if err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	pending := make([]int, 0, len(msgs))
	now := time.Now()
	for i, m := range msgs {
		if name := reservedAttr(m.Attributes); name != "" {
			results[i].Err = invalidError{fmt.Errorf("producer: the message attribute %s is reserved: sqsonce writes it for a body in S3 or compressed (Config.Payload) or a NotBefore", name)}
			continue
		}
		if msgs[i], err = p.notBefore(ctx, m, now); err != nil {
			results[i].Err = err
			continue
		}
		if p.cfg.Payload.on() {
			// Everything but the size, before the body is compressed
			// or stored: the size is checked once it is.
			if err := p.check(m, results[i].ID, math.MaxInt); err != nil {
				results[i].Err = err
				continue
			}
		}
		pending = append(pending, i)
	}
	if p.cfg.Payload.on() {
		pending = p.encodePayloads(ctx, msgs, results, pending, limit)
	}
	ready := pending[:0] // filtered in place
	for _, i := range pending {
		m := msgs[i]
		if !p.cfg.NoTraceContext && trace.SpanContextFromContext(ctx).IsValid() {
			attrs := maps.Clone(m.Attributes)
			if attrs == nil {
				attrs = map[string]types.MessageAttributeValue{}
			}
			// One slot stays for sqsonce-id.
			room := MaxMessageAttributes
			if _, ok := attrs[AttrID]; !ok {
				room--
			}
			traced := m
			traced.Attributes = attrs
			// The trace context is left out, as when there is no slot
			// for it, when the message would not fit with it.
			if telemetry.Inject(ctx, attrs, room) && messageSize(traced, results[i].ID) <= limit {
				msgs[i] = traced
			}
		}
		if err := p.check(msgs[i], results[i].ID, limit); err != nil {
			results[i].Err = err
			continue
		}
		ready = append(ready, i)
	}
	pending = ready
	p.send.send(ctx, &sqsCall{p: p, msgs: msgs, results: results}, results, pending)
	return results
}

// check refuses what SQS would refuse for the message itself, as it will
// be sent (with sqsonce-id id) to a queue that takes messages of up to
// limit bytes. Every error it returns matches [ErrInvalid].
func (p *Producer) check(m Message, id string, limit int) error {
	if p.fifo && m.GroupID == "" {
		return invalidError{ErrNoGroup}
	}
	if p.fifo {
		if err := checkGroupID(m.GroupID); err != nil {
			return invalidError{err}
		}
	}
	if p.fifo && m.Delay > 0 {
		return invalidError{errors.New("producer: per-message delay is not supported on FIFO queues")}
	}
	if m.Delay < 0 || m.Delay > 15*time.Minute {
		return invalidError{errors.New("producer: delay must be between 0 and 15 minutes")}
	}
	if m.Body == "" {
		return invalidError{errors.New("producer: the message body is empty")}
	}
	if i := invalidChar(m.Body); i >= 0 {
		return invalidError{fmt.Errorf("producer: the message body has a character SQS refuses at byte %d (it allows #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF in valid UTF-8)", i)}
	}
	n := len(m.Attributes)
	if _, ok := m.Attributes[AttrID]; !ok {
		n++
	}
	if n > MaxMessageAttributes {
		return invalidError{fmt.Errorf("%w: %d message attributes with sqsonce-id (SQS allows %d)", ErrTooLarge, n, MaxMessageAttributes)}
	}
	if size := messageSize(m, id); size > limit {
		return invalidError{fmt.Errorf("%w: %d bytes with its attributes (the queue's MaximumMessageSize is %d)", ErrTooLarge, size, limit)}
	}
	return nil
}

// checkGroupID refuses a MessageGroupId SQS refuses: empty, over 128
// characters, or with a character that is not a letter, a digit or ASCII
// punctuation.
func checkGroupID(g string) error {
	if len(g) > MaxGroupIDLength {
		return fmt.Errorf("producer: the group id is %d characters long (SQS allows %d)", len(g), MaxGroupIDLength)
	}
	for i := 0; i < len(g); i++ {
		if g[i] <= ' ' || g[i] >= 0x7f {
			return fmt.Errorf("producer: the group id has a character SQS refuses at byte %d (letters, digits and ASCII punctuation only)", i)
		}
	}
	return nil
}

// invalidChar returns the byte offset of the first character of s that SQS
// refuses in a message body, or -1.
func invalidChar(s string) int {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i // not UTF-8
			}
		case r == 0x9 || r == 0xA || r == 0xD,
			r >= 0x20 && r <= 0xD7FF,
			r >= 0xE000 && r <= 0xFFFD,
			r >= 0x10000 && r <= 0x10FFFF:
		default:
			return i
		}
	}
	return -1
}

// invalidError marks an error the message itself causes: it matches
// [ErrInvalid] and what it wraps.
type invalidError struct{ err error }

func (e invalidError) Error() string      { return e.err.Error() }
func (e invalidError) Unwrap() error      { return e.err }
func (invalidError) Is(target error) bool { return target == ErrInvalid }

// messageSize is the size SQS counts, as the message is sent with
// sqsonce-id id: the body plus each attribute's name, data type and value.
//
// The not-before attribute counts as long as a re-sent copy's can be
// (hold.MaxLen), so that the copies a consumer sends fit too.
func messageSize(m Message, id string) int {
	n := len(m.Body)
	for name, v := range m.Attributes {
		if name == AttrID {
			continue
		}
		str := aws.ToString(v.StringValue)
		if name == AttrNotBefore {
			n += max(len(str), hold.MaxLen) - len(str)
		}
		n += attrSize(name, aws.ToString(v.DataType), str, v.BinaryValue)
	}
	return n + attrSize(AttrID, "String", id, nil)
}

// sqsCall is one SendBatch call's messages.
type sqsCall struct {
	p       *Producer
	msgs    []Message
	results []Result
}

func (c *sqsCall) group(idx int) string { return c.msgs[idx].GroupID }
func (c *sqsCall) size(idx int) int     { return messageSize(c.msgs[idx], c.results[idx].ID) }

// sendOnce makes one SendMessageBatch call and returns the entries worth
// another attempt; every entry's Result is updated.
func (c *sqsCall) sendOnce(ctx context.Context, batch []int) []int {
	p, msgs, results := c.p, c.msgs, c.results
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	// The strings the entries point to, in one allocation: "String", then
	// each entry's id and sqsonce-id.
	strs := make([]string, 1+2*len(batch))
	strs[0] = "String"
	for i, idx := range batch {
		strs[1+2*i], strs[2+2*i] = strconv.Itoa(i), results[idx].ID
		entries[i] = p.entry(&strs[1+2*i], &msgs[idx], &strs[2+2*i], &strs[0])
		results[idx].Attempts++
	}
	out, err := p.cfg.Client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{
		QueueUrl: aws.String(p.cfg.QueueURL),
		Entries:  entries,
	}, sdkhttp.SQS)
	if err != nil {
		return callFailed(ctx, c, results, batch, err, refusesMessage(err), "SQS", p.cfg.Logger)
	}
	oks := make([]entryOK, len(out.Successful))
	for i, ok := range out.Successful {
		oks[i] = entryOK{aws.ToString(ok.Id), aws.ToString(ok.MessageId), aws.ToString(ok.SequenceNumber)}
	}
	fails := make([]EntryError, len(out.Failed))
	ids := make([]string, len(out.Failed))
	for i, f := range out.Failed {
		ids[i] = aws.ToString(f.Id)
		fails[i] = EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
	}
	return settle(results, batch, oks, ids, fails, "SQS", p.cfg.Logger)
}

// entry is the batch entry id of m, sent with sqsonce-id *sqsonceID;
// str points to "String". The entry points into m and the strings given,
// which must not change until the call returns.
func (p *Producer) entry(id *string, m *Message, sqsonceID, str *string) types.SendMessageBatchRequestEntry {
	attrs := m.Attributes
	if !carriesID(attrs, *sqsonceID) {
		// Sent as they are, plus sqsonce-id: the caller's map is not
		// changed.
		attrs = make(map[string]types.MessageAttributeValue, len(m.Attributes)+1)
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		attrs[AttrID] = types.MessageAttributeValue{DataType: str, StringValue: sqsonceID}
	}
	e := types.SendMessageBatchRequestEntry{
		Id:                id,
		MessageBody:       &m.Body,
		MessageAttributes: attrs,
	}
	if p.fifo {
		e.MessageGroupId = aws.String(m.GroupID)
		e.MessageDeduplicationId = aws.String(dedupeID(cmp.Or(m.DeduplicationID, *sqsonceID)))
	} else if m.Delay > 0 {
		e.DelaySeconds = int32(m.Delay / time.Second)
	}
	return e
}

// carriesID reports whether attrs already hold sqsonce-id as it is sent:
// the String id and nothing else, so that they can be sent as they are.
func carriesID(attrs map[string]types.MessageAttributeValue, id string) bool {
	v, ok := attrs[AttrID]
	return ok && v.StringValue != nil && *v.StringValue == id && aws.ToString(v.DataType) == "String" &&
		v.BinaryValue == nil && v.StringListValues == nil && v.BinaryListValues == nil
}

// dedupeID fits an id into MessageDeduplicationId's 128 characters of
// [a-zA-Z0-9!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~]; an id that does not fit is
// replaced by its hash.
func dedupeID(id string) string {
	ok := len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		ok = id[i] > ' ' && id[i] < 0x7f
	}
	if ok {
		return id
	}
	return hashID(id)
}

// EntryError is SQS's or SNS's refusal of one entry of a batch.
type EntryError struct {
	Code, Message string
	// SenderFault is true when the request itself was wrong (not retried).
	SenderFault bool
	// Service is the service that refused it: "SQS" (when empty) or "SNS".
	Service string
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("producer: %s refused the message: %s: %s", cmp.Or(e.Service, "SQS"), e.Code, e.Message)
}

// Is reports whether e matches [ErrInvalid]: a sender fault whose code
// is about the message, not about access, keys, throttling or the queue
// (those can heal without changing the message).
func (e *EntryError) Is(target error) bool {
	return target == ErrInvalid && e.SenderFault && !notTheMessage(e.Code)
}

// refusesMessage reports whether a SendMessageBatch call failed as a whole
// for what one of its messages holds (a body, an attribute, a size), by
// its error code.
func refusesMessage(err error) bool {
	var long *types.BatchRequestTooLong
	return sqserr.MessageRefused(err) || errors.As(err, &long)
}

// notTheMessage reports whether an SQS or SNS error code says the send
// failed for a reason that is not the message's own: access, credentials,
// the queue's or topic's KMS key, throttling, the queue or topic itself.
func notTheMessage(code string) bool {
	code = strings.TrimPrefix(code, "AWS.SimpleQueueService.")
	if strings.HasPrefix(code, "Kms") || strings.HasPrefix(code, "KMS") {
		return true
	}
	switch code {
	case "AccessDenied", "AccessDeniedException", "InvalidSecurity", "InvalidClientTokenId",
		"UnrecognizedClientException", "SignatureDoesNotMatch", "ExpiredToken", "RequestExpired",
		"RequestThrottled", "ThrottlingException", "Throttling", "OverLimit",
		"QueueDoesNotExist", "NonExistentQueue", "InvalidAddress",
		"InternalError", "InternalFailure", "ServiceUnavailable",
		// SNS's.
		"AuthorizationError", "NotFound", "ResourceNotFound", "Throttled", "ConcurrentAccess",
		"EndpointDisabled", "PlatformApplicationDisabled", "InvalidState":
		return true
	}
	return false
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
