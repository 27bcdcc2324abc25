package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// SNS's limits on what one publish may carry (see the SNS API reference,
// Publish and PublishBatch, and "Large message payloads").
const (
	// DefaultTopicMessageBytes is a topic's MaximumMessageSize when it was
	// not set: 256 KiB. It bounds one message (body plus attribute names,
	// types and values) and also the sum of the messages of one
	// PublishBatch.
	DefaultTopicMessageBytes = 256 << 10
	// MaxTopicMessageBytes is the largest MaximumMessageSize a topic can
	// have: 1 MiB.
	MaxTopicMessageBytes = 1 << 20
	// MaxSubjectLength is the longest Subject SNS takes, in characters
	// ("less than 100 characters").
	MaxSubjectLength = 99
)

// SNSAPI is the part of the SNS client a Publisher uses. *sns.Client
// satisfies it. GetTopicAttributes reads the topic's MaximumMessageSize,
// once, unless PublisherConfig.MaxMessageBytes is set.
type SNSAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
	GetTopicAttributes(ctx context.Context, in *sns.GetTopicAttributesInput, optFns ...func(*sns.Options)) (*sns.GetTopicAttributesOutput, error)
}

var _ SNSAPI = (*sns.Client)(nil)

// PublisherConfig configures a Publisher. Client and TopicARN are
// required.
type PublisherConfig struct {
	// Client publishes the messages. Required.
	Client SNSAPI
	// TopicARN is the topic published to. Required.
	TopicARN string
	// FIFO says the topic is a FIFO topic. Defaults to whether TopicARN
	// ends in ".fifo".
	FIFO *bool
	// MaxMessageBytes is the largest message the topic takes (its
	// MaximumMessageSize, 1024 to [MaxTopicMessageBytes]), and the most
	// the messages of one PublishBatch call add up to: a larger message
	// fails with [ErrTooLarge] without being published. Defaults to
	// reading the topic's MaximumMessageSize with GetTopicAttributes,
	// once, at the first publish (which then needs sns:GetTopicAttributes;
	// a topic that does not report one has SNS's default,
	// [DefaultTopicMessageBytes]); set it to make no such call.
	MaxMessageBytes int
	// NewIDFunc makes the sqsonce-id of a message published without one.
	// Defaults to a UUIDv7 (time-ordered, random).
	NewIDFunc func() string
	// MaxAttempts is how many times a message is published before its
	// failure is returned (a message SNS refuses as the sender's fault is
	// not retried: see [ErrInvalid]). Defaults to 5.
	MaxAttempts int
	// BackoffBase and BackoffMax bound the full-jitter wait between
	// attempts. Default to 100ms and 5s.
	BackoffBase, BackoffMax time.Duration
	// Concurrency is how many PublishBatch calls run at once on a standard
	// topic. FIFO topics get one call at a time, so that each group keeps
	// its order. Defaults to 4.
	Concurrency int
	// Logger receives one warning per failed message (its id and the
	// reason, never the body). Defaults to zap.NewNop().
	Logger *zap.Logger
	// NoTraceContext stops the publisher from adding the W3C trace
	// context (traceparent, tracestate attributes) of the ctx passed to
	// Publish and PublishBatch, as [Config.NoTraceContext] does for the
	// Producer: by default it is added when ctx carries a span and the
	// message has room for it.
	NoTraceContext bool
}

// Publication is one message to publish to a topic.
type Publication struct {
	// ID is the message's sqsonce-id: the job's identity, made when the
	// job was made, so that a re-publish is recognised downstream. Empty
	// means a new one from PublisherConfig.NewIDFunc.
	ID string
	// Body is the message. Required; valid UTF-8 with only the characters
	// SQS allows (#x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD,
	// #x10000 to #x10FFFF): SNS takes others, but an SQS subscription
	// with raw message delivery could not deliver them.
	Body string
	// Subject is the optional SNS Subject (in the envelope, and the
	// subject of e-mail deliveries): at most [MaxSubjectLength]
	// characters, without line breaks or control characters.
	Subject string
	// Attributes are published as they are, plus sqsonce-id. Every
	// attribute needs a DataType and a value. At most
	// [MaxMessageAttributes] with sqsonce-id: SNS discards a message with
	// more for every SQS subscription with raw message delivery.
	Attributes map[string]snstypes.MessageAttributeValue
	// GroupID is the MessageGroupId; required on a FIFO topic, where it is
	// 1 to 128 characters, each a letter, a digit or one of
	// !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~. On a standard topic it is optional
	// (SNS passes it to SQS fair queues) and checked the same way.
	GroupID string
	// DeduplicationID is the MessageDeduplicationId on a FIFO topic.
	// Defaults to the sqsonce-id, so that SNS drops a re-publish within
	// its 5-minute window; set it to publish a deliberate copy. Not sent
	// to standard topics.
	DeduplicationID string
}

// Publisher publishes messages to an SNS topic stamped with sqsonce-id,
// in Publish or PublishBatch calls within SNS's limits, retrying failed
// entries with backoff.
//
// The sqsonce-id is a message attribute. With raw message delivery it
// reaches an SQS subscription as an SQS message attribute, which the
// consumer's default KeyFunc reads; without, it is in the envelope's
// MessageAttributes, which envelope.Unwrap reads. Either way a job
// published twice with the same ID (a retry after a timeout, a re-run)
// has one key downstream, where SNS gives each publication a new
// MessageId.
type Publisher struct {
	cfg  PublisherConfig
	send sender

	limitMu sync.Mutex
	limit   int // the largest message the topic takes; 0 until read
}

// NewPublisher checks cfg and fills its defaults.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.Client == nil {
		return nil, errors.New("producer: PublisherConfig.Client is required")
	}
	if err := checkTopicARN(cfg.TopicARN); err != nil {
		return nil, err
	}
	if cfg.MaxAttempts < 0 || cfg.Concurrency < 0 || cfg.BackoffBase < 0 || cfg.BackoffMax < 0 {
		return nil, errors.New("producer: MaxAttempts, Concurrency and the backoff bounds must not be negative")
	}
	if cfg.MaxMessageBytes != 0 && (cfg.MaxMessageBytes < MinMessageBytes || cfg.MaxMessageBytes > MaxTopicMessageBytes) {
		return nil, fmt.Errorf("producer: PublisherConfig.MaxMessageBytes must be the topic's MaximumMessageSize, %d to %d (or 0 to read it from the topic)", MinMessageBytes, MaxTopicMessageBytes)
	}
	fifo := strings.HasSuffix(cfg.TopicARN, ".fifo")
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
	return &Publisher{cfg: cfg, limit: cfg.MaxMessageBytes, send: sender{
		fifo: fifo, maxAttempts: cfg.MaxAttempts, backoffBase: cfg.BackoffBase, backoffMax: cfg.BackoffMax,
		concurrency: cfg.Concurrency,
	}}, nil
}

// checkTopicARN refuses what is not an SNS topic ARN
// (arn:<partition>:sns:<region>:<account>:<name>), such as a topic name.
func checkTopicARN(arn string) error {
	if arn == "" {
		return errors.New("producer: PublisherConfig.TopicARN is required")
	}
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sns" || parts[5] == "" || strings.Contains(parts[5], ":") {
		return fmt.Errorf("producer: PublisherConfig.TopicARN %q is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)", arn)
	}
	return nil
}

// MaxMessageBytes returns the largest message the topic takes:
// PublisherConfig.MaxMessageBytes, else the topic's MaximumMessageSize,
// read with GetTopicAttributes on the first call that needs it and kept
// ([DefaultTopicMessageBytes] when the topic reports none). An error (the
// call failed) is not kept: the next call tries again.
func (p *Publisher) MaxMessageBytes(ctx context.Context) (int, error) {
	p.limitMu.Lock()
	defer p.limitMu.Unlock()
	if p.limit > 0 {
		return p.limit, nil
	}
	out, err := p.cfg.Client.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(p.cfg.TopicARN)}, sdkhttp.SNS)
	if err != nil {
		return 0, fmt.Errorf("producer: read the topic's MaximumMessageSize (allow sns:GetTopicAttributes, or set PublisherConfig.MaxMessageBytes): %w", err)
	}
	raw, ok := out.Attributes["MaximumMessageSize"]
	if !ok {
		p.limit = DefaultTopicMessageBytes
		return p.limit, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < MinMessageBytes {
		return 0, fmt.Errorf("producer: the topic's MaximumMessageSize is %q, not a size of at least %d bytes (set PublisherConfig.MaxMessageBytes)", raw, MinMessageBytes)
	}
	p.limit = min(n, MaxTopicMessageBytes)
	return p.limit, nil
}

// Publish publishes one message with a Publish call and returns its
// result; the error is Result.Err. It is retried as [Publisher.PublishBatch]
// retries a message.
func (p *Publisher) Publish(ctx context.Context, m Publication) (Result, error) {
	r := p.publish(ctx, []Publication{m}, true)[0]
	return r, r.Err
}

// PublishBatch publishes msgs in as few PublishBatch calls as SNS's limits
// allow (10 entries, the topic's MaximumMessageSize a call) and returns
// one Result per message, in order. A message is retried until it is
// accepted, it cannot be published as it is ([ErrInvalid]: checked before
// publishing where the publisher can, else refused by SNS as the sender's
// fault), MaxAttempts is reached or ctx ends. When the topic's
// MaximumMessageSize cannot be read (see [Publisher.MaxMessageBytes])
// nothing is published and every Result has that error. On a FIFO topic
// MessageDeduplicationId is the sqsonce-id (so a retry within SNS's
// 5-minute window is not delivered twice), calls go one at a time in the
// order of msgs with at most one message of each group per call, and once
// a message of a group fails the group's later messages are not published
// (ErrGroupBlocked).
func (p *Publisher) PublishBatch(ctx context.Context, msgs []Publication) []Result {
	return p.publish(ctx, msgs, false)
}

// publish is Publish (single: one message, with the Publish call) and
// PublishBatch.
func (p *Publisher) publish(ctx context.Context, msgs []Publication, single bool) []Result {
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
	var pending []int
	for i, m := range msgs {
		if !p.cfg.NoTraceContext && trace.SpanContextFromContext(ctx).IsValid() {
			attrs := maps.Clone(m.Attributes)
			if attrs == nil {
				attrs = map[string]snstypes.MessageAttributeValue{}
			}
			room := MaxMessageAttributes // one slot stays for sqsonce-id
			if _, ok := attrs[AttrID]; !ok {
				room--
			}
			traced := m
			traced.Attributes = attrs
			if telemetry.InjectAs(ctx, attrs, room, snsAttr) && publicationSize(traced, results[i].ID) <= limit {
				msgs[i] = traced
			}
		}
		if err := p.check(msgs[i], results[i].ID, limit); err != nil {
			results[i].Err = err
			continue
		}
		pending = append(pending, i)
	}
	s := p.send
	s.callBytes = limit
	s.send(ctx, &snsCall{p: p, msgs: msgs, results: results, single: single}, results, pending)
	return results
}

// snsAttr is an SQS String attribute as an SNS one.
func snsAttr(v sqstypes.MessageAttributeValue) snstypes.MessageAttributeValue {
	return snstypes.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue}
}

// check refuses what SNS would refuse for the message itself, as it will
// be published (with sqsonce-id id) to a topic that takes messages of up
// to limit bytes, and what an SQS subscription with raw delivery could not
// take. Every error it returns matches [ErrInvalid].
func (p *Publisher) check(m Publication, id string, limit int) error {
	if p.send.fifo && m.GroupID == "" {
		return invalidError{ErrNoGroup}
	}
	if m.GroupID != "" {
		if err := checkGroupID(m.GroupID); err != nil {
			return invalidError{err}
		}
	}
	if m.Body == "" {
		return invalidError{errors.New("producer: the message body is empty")}
	}
	if i := invalidChar(m.Body); i >= 0 {
		return invalidError{fmt.Errorf("producer: the message body has a character an SQS subscription refuses at byte %d (it allows #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF in valid UTF-8)", i)}
	}
	if err := checkSubject(m.Subject); err != nil {
		return invalidError{err}
	}
	n := len(m.Attributes)
	if _, ok := m.Attributes[AttrID]; !ok {
		n++
	}
	if n > MaxMessageAttributes {
		return invalidError{fmt.Errorf("%w: %d message attributes with sqsonce-id (SNS drops a message with more than %d at every SQS subscription with raw delivery)", ErrTooLarge, n, MaxMessageAttributes)}
	}
	for name, v := range m.Attributes {
		if name == AttrID {
			continue
		}
		if name == "" || aws.ToString(v.DataType) == "" || (aws.ToString(v.StringValue) == "" && len(v.BinaryValue) == 0) {
			return invalidError{fmt.Errorf("producer: message attribute %q has no data type or no value (SNS needs both)", name)}
		}
	}
	if size := publicationSize(m, id); size > limit {
		return invalidError{fmt.Errorf("%w: %d bytes with its attributes (the topic's MaximumMessageSize is %d)", ErrTooLarge, size, limit)}
	}
	return nil
}

// checkSubject refuses a Subject SNS refuses: over [MaxSubjectLength]
// characters, not UTF-8, or with a line break or control character.
func checkSubject(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("producer: the subject is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > MaxSubjectLength {
		return fmt.Errorf("producer: the subject is %d characters long (SNS takes fewer than 100)", n)
	}
	for i, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return fmt.Errorf("producer: the subject has a line break or control character at byte %d", i)
		}
	}
	return nil
}

// publicationSize is the size SNS counts against the topic's
// MaximumMessageSize, as the message is published with sqsonce-id id: the
// body plus each attribute's name, data type and value.
func publicationSize(m Publication, id string) int {
	n := len(m.Body)
	for name, v := range m.Attributes {
		if name == AttrID {
			continue
		}
		n += attrSize(name, aws.ToString(v.DataType), aws.ToString(v.StringValue), v.BinaryValue)
	}
	return n + attrSize(AttrID, "String", id, nil)
}

// snsCall is one Publish or PublishBatch call's messages.
type snsCall struct {
	p       *Publisher
	msgs    []Publication
	results []Result
	single  bool // publish with Publish (one message) rather than PublishBatch
}

func (c *snsCall) group(idx int) string { return c.msgs[idx].GroupID }
func (c *snsCall) size(idx int) int     { return publicationSize(c.msgs[idx], c.results[idx].ID) }

// sendOnce makes one Publish or PublishBatch call and returns the entries
// worth another attempt; every entry's Result is updated.
func (c *snsCall) sendOnce(ctx context.Context, batch []int) []int {
	p, results := c.p, c.results
	for _, idx := range batch {
		results[idx].Attempts++
	}
	if c.single && len(batch) == 1 {
		e := p.entry("0", c.msgs[batch[0]], results[batch[0]].ID)
		out, err := p.cfg.Client.Publish(ctx, &sns.PublishInput{
			TopicArn:               aws.String(p.cfg.TopicARN),
			Message:                e.Message,
			Subject:                e.Subject,
			MessageAttributes:      e.MessageAttributes,
			MessageGroupId:         e.MessageGroupId,
			MessageDeduplicationId: e.MessageDeduplicationId,
		}, sdkhttp.SNS)
		if err != nil {
			return callFailed(ctx, c, results, batch, err, snsRefusesMessage(err), "SNS", p.cfg.Logger)
		}
		r := &results[batch[0]]
		r.Err, r.MessageID, r.SequenceNumber = nil, aws.ToString(out.MessageId), aws.ToString(out.SequenceNumber)
		return nil
	}
	entries := make([]snstypes.PublishBatchRequestEntry, len(batch))
	for i, idx := range batch {
		entries[i] = p.entry(strconv.Itoa(i), c.msgs[idx], results[idx].ID)
	}
	out, err := p.cfg.Client.PublishBatch(ctx, &sns.PublishBatchInput{
		TopicArn:                   aws.String(p.cfg.TopicARN),
		PublishBatchRequestEntries: entries,
	}, sdkhttp.SNS)
	if err != nil {
		return callFailed(ctx, c, results, batch, err, snsRefusesMessage(err), "SNS", p.cfg.Logger)
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
	return settle(results, batch, oks, ids, fails, "SNS", p.cfg.Logger)
}

// entry is the message as published: its attributes with sqsonce-id, and
// on a FIFO topic its group and deduplication ids.
func (p *Publisher) entry(id string, m Publication, sqsonceID string) snstypes.PublishBatchRequestEntry {
	attrs := make(map[string]snstypes.MessageAttributeValue, len(m.Attributes)+1)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	attrs[AttrID] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(sqsonceID)}
	e := snstypes.PublishBatchRequestEntry{
		Id:                aws.String(id),
		Message:           aws.String(m.Body),
		MessageAttributes: attrs,
	}
	if m.Subject != "" {
		e.Subject = aws.String(m.Subject)
	}
	if m.GroupID != "" {
		e.MessageGroupId = aws.String(m.GroupID)
	}
	if p.send.fifo {
		e.MessageDeduplicationId = aws.String(dedupeID(cmp.Or(m.DeduplicationID, sqsonceID)))
	}
	return e
}

// snsRefusesMessage reports whether a Publish or PublishBatch call failed
// as a whole for what one of its messages holds (a body, an attribute, a
// size), by its error code.
func snsRefusesMessage(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "InvalidParameter", "ParameterValueInvalid", "InvalidParameterValue", "ValidationException", "BatchRequestTooLong":
		return true
	}
	return false
}
