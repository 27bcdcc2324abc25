// Package envelope unwraps messages that reach SQS inside an SNS or
// EventBridge envelope, so that the handler sees the publisher's body and
// attributes and the dedupe key is the publisher's id.
//
//	dd, err := dedupe.New(dedupe.Config{Store: store})
//	...
//	c, err := consumer.New(consumer.Config{
//		QueueName:  "orders",
//		Middleware: []consumer.Middleware{envelope.Unwrap(envelope.Options{}), dd.Wrap},
//		Handler:    handler,
//	})
//
// Put it first, before dedupe: it sets the message's key. The key is the
// sqsonce-id attribute inside the envelope (the SNS MessageAttributes),
// else the SNS MessageId or the EventBridge event id. The fallback is the
// same on every SQS delivery of one publication, but not across
// publications: a publisher that retries a Publish (its first call timed
// out after SNS took the message) or a PutEvents makes a second
// publication with a new id, and the job is handled twice. Publish with
// [github.com/sqsonce/sqsonce/producer.Publisher], which stamps
// sqsonce-id as a message attribute, or stamp it yourself, or read the
// publisher's own id from the body with Options.KeyFunc. The first
// envelope keyed by the fallback on each queue is logged once, at warn
// level, to Options.Logger (its ids and topic, never its body).
//
// A body that is not an envelope (SNS raw message delivery, a direct
// send, a message redriven from the DLQ) passes through unchanged, unless
// Options.Require is set; with raw delivery the SNS message attributes
// are SQS message attributes, so the consumer's own key (sqsonce-id, else
// the SQS MessageId, new on every delivery) applies. An envelope that
// cannot be read is a permanent failure whose reason says what is wrong.
//
// While the handler runs, msg.Body and msg.Attributes are the inner ones
// and [FromContext] describes the envelope; afterwards they are restored,
// so a dead letter carries the message exactly as it arrived (with the
// key as its sqsonce-id).
//
// # Signatures
//
// An SNS envelope is JSON that anyone allowed to send to the queue can
// write: its TopicArn, MessageId and Timestamp prove nothing by
// themselves. SNS signs what it sends; with Options.Verifier set, every
// SNS envelope must carry a valid SignatureVersion 1 (SHA1withRSA) or 2
// (SHA256withRSA) signature by the certificate at its SigningCertURL, and
// that URL must be https on SNS's own host (sns.<region>.amazonaws.com,
// sns.cn-<region>.amazonaws.com.cn in China; GovCloud's us-gov-<region>
// is of the first form), else the message is dead-lettered with
// [ErrUnverified] and its reason. Certificates are fetched once and
// cached; a fetch that fails (SNS unreachable) is a transient failure,
// retried with the consumer's backoff.
//
//	v, err := envelope.NewVerifier(envelope.VerifierConfig{})
//	mw := envelope.Unwrap(envelope.Options{Verifier: v, Require: true})
//
// Verification is off unless a Verifier is set. The control that keeps
// strangers out of an SNS-fed queue is its access policy (SendMessage for
// the sns.amazonaws.com service principal only, conditioned on the
// topic's aws:SourceArn); verification adds proof against principals the
// policy or IAM does let send. It costs every worker an https route to
// sns.<region>.amazonaws.com (a NAT or an SNS interface endpoint), which
// workers that only talk to SQS often lack: on by default, such a worker
// would retry every SNS message until SQS dead-lettered it. Turn it on
// where anything but SNS may send to the queue, or where a handler decides
// by the topic, the id or the time; set Require with it, so that a body
// which is no envelope at all is refused rather than passed through, and
// check [Envelope.Verified] where it matters (EventBridge events carry no
// signature and pass unverified).
//
// A signature covers Message, MessageId, Subject, Timestamp, TopicArn and
// Type; SNS signs neither MessageAttributes nor anything SQS adds. A
// sender that holds a genuine notification can replay it with other
// attributes, the sqsonce-id that sets the key among them. Where that
// matters, carry the id inside the Message and read it with
// Options.KeyFunc, which sees the unwrapped (signed) body.
//
// # Confirmations
//
// A SubscriptionConfirmation or UnsubscribeConfirmation reaches the queue
// when a subscription is made or removed from another account. Unwrap
// neither runs the handler for it nor confirms anything: it acks the
// message and logs, at info level, its type and topic (never its token),
// after checking its signature when a Verifier is set. Confirming a
// subscription is an operator's decision; making the subscription from
// the queue's own account needs no confirmation at all.
package envelope

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// Kind says which envelope a message came in.
type Kind string

const (
	// SNS is a notification of an SNS subscription without raw delivery.
	SNS Kind = "sns"
	// EventBridge is an event of an EventBridge rule with an SQS target.
	EventBridge Kind = "eventbridge"
)

// Envelope describes the wrapper of the message being handled.
type Envelope struct {
	Kind Kind
	// Type is the SNS message type (Notification, SubscriptionConfirmation
	// or UnsubscribeConfirmation); empty for EventBridge.
	Type string
	// Verified reports that the SNS signature was checked and is valid
	// (see Options.Verifier). EventBridge envelopes are never verified.
	Verified bool
	// ID is the SNS MessageId or the EventBridge event id.
	ID string
	// Topic is the SNS TopicArn; Subject its optional subject.
	Topic, Subject string
	// Source and DetailType are the EventBridge event's.
	Source, DetailType string
	// Time is when SNS or EventBridge accepted the publication.
	Time time.Time
}

// Options configures [Unwrap]; the zero value is ready.
type Options struct {
	// Require makes a body that is not an SNS or EventBridge envelope a
	// permanent failure. Defaults to false: such bodies pass through.
	Require bool
	// KeyFunc computes the key from the unwrapped message; "" means the
	// default. Defaults to the inner sqsonce-id attribute, else the
	// envelope's id (which a publisher's retry does not keep: see the
	// package doc).
	KeyFunc sqsmsg.KeyFunc
	// Verifier checks the signature of every SNS envelope (see the package
	// doc, "Signatures"). Defaults to nil: SNS envelopes are trusted as
	// they arrive, and [Envelope.Verified] is false.
	Verifier *Verifier
	// Logger receives one info line per SubscriptionConfirmation or
	// UnsubscribeConfirmation acked, and one warning per queue when the
	// first envelope without sqsonce-id (keyed by the envelope's id, which
	// does not cover publisher retries) arrives. Set it to the consumer's
	// Logger. Defaults to a no-op logger.
	Logger *zap.Logger
}

// ErrMalformed is the error (made permanent) of an envelope that cannot be
// read.
var ErrMalformed = errors.New("envelope: malformed")

// ErrUnverified is the error (made permanent) of an SNS envelope whose
// signature is missing, does not match, or rests on a certificate that is
// not SNS's own.
var ErrUnverified = errors.New("envelope: SNS signature not verified")

// SNS message types.
const (
	typeNotification = "Notification"
	typeSubscribe    = "SubscriptionConfirmation"
	typeUnsubscribe  = "UnsubscribeConfirmation"
)

type ctxKey struct{}

// FromContext returns the envelope of the message being handled, or nil
// when it came unwrapped.
func FromContext(ctx context.Context) *Envelope {
	e, _ := ctx.Value(ctxKey{}).(*Envelope)
	return e
}

// Unwrap returns the middleware.
func Unwrap(opts Options) sqsmsg.Middleware {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	// Per middleware, not per package: two consumers (or tests) each
	// warn for their own queues. Not per wrapped handler either: the
	// consumer wraps its chain for every message.
	fallback := &fallbackWarning{logger: logger, warned: map[string]bool{}}
	return func(next sqsmsg.Handler) sqsmsg.Handler {
		return sqsmsg.HandlerFunc(func(ctx context.Context, msg *sqsmsg.Message) error {
			env, body, attrs, sns, err := parse(msg.Body)
			switch {
			case err != nil:
				return sqsmsg.Permanent(err)
			case env == nil && opts.Require:
				return sqsmsg.Permanent(fmt.Errorf("%w: the body is neither an SNS notification nor an EventBridge event", ErrMalformed))
			case env == nil:
				return next.Handle(ctx, msg)
			}
			if sns != nil && opts.Verifier != nil {
				if err := opts.Verifier.verify(ctx, sns); err != nil {
					if errors.Is(err, ErrUnverified) {
						return sqsmsg.Permanent(err)
					}
					return err // the certificate could not be fetched: try again later
				}
				env.Verified = true
			}
			if env.Type == typeSubscribe || env.Type == typeUnsubscribe {
				logger.Info("SNS confirmation acknowledged, nothing confirmed",
					zap.String("message_id", msg.ID),
					zap.String("sns_type", env.Type),
					zap.String("topic", env.Topic),
					zap.String("sns_message_id", env.ID),
					zap.Bool("verified", env.Verified))
				return nil
			}
			origBody, origAttrs := msg.Body, msg.Attributes
			defer func() { msg.Body, msg.Attributes = origBody, origAttrs }()
			msg.Body, msg.Attributes = body, attrs
			key := ""
			if opts.KeyFunc != nil {
				key = opts.KeyFunc(msg)
			}
			if key == "" {
				key = msg.Attribute(sqsmsg.AttrID)
			}
			if key == "" {
				key = env.ID
				fallback.warn(msg, env)
			}
			delivery.SetKey(msg, key)
			return next.Handle(context.WithValue(ctx, ctxKey{}, env), msg)
		})
	}
}

// fallbackWarning says, once per queue, that messages arrive keyed by
// their envelope's id: SNS gives a publisher's retry of a Publish a new
// MessageId (and EventBridge a retried PutEvents a new event id), so a job
// published twice is handled twice. Only the publisher's own id
// (sqsonce-id, or one read from the body by Options.KeyFunc) is the same
// on both copies.
type fallbackWarning struct {
	logger *zap.Logger
	mu     sync.Mutex
	warned map[string]bool // queue URL → said
}

func (w *fallbackWarning) warn(msg *sqsmsg.Message, env *Envelope) {
	w.mu.Lock()
	said := w.warned[msg.QueueURL]
	w.warned[msg.QueueURL] = true
	w.mu.Unlock()
	if said {
		return
	}
	fields := []zap.Field{zap.String("queue_url", msg.QueueURL), zap.String("message_id", msg.ID)}
	if env.Kind == EventBridge {
		w.logger.Warn("envelope: EventBridge event keyed by its event id, which a retried PutEvents does not keep: "+
			"an event put twice is handled twice; set Options.KeyFunc to read the publisher's id from the detail (said once per queue)",
			append(fields, zap.String("event_id", env.ID), zap.String("source", env.Source))...)
		return
	}
	w.logger.Warn("envelope: SNS message without sqsonce-id, keyed by its SNS MessageId, which a publisher's retry does not keep: "+
		"a job published twice is handled twice; publish with producer.Publisher (or stamp sqsonce-id yourself), "+
		"or set Options.KeyFunc to read the publisher's id from the message (said once per queue)",
		append(fields, zap.String("sns_message_id", env.ID), zap.String("topic", env.Topic))...)
}

type snsAttr struct {
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

// snsEnvelope is an SNS message as SNS writes it (the JSON formats of
// Notification, SubscriptionConfirmation and UnsubscribeConfirmation).
// Optional strings that the signature covers only when present are
// pointers.
type snsEnvelope struct {
	Type              string             `json:"Type"`
	MessageID         string             `json:"MessageId"`
	TopicArn          string             `json:"TopicArn"`
	Subject           *string            `json:"Subject"`
	Message           *string            `json:"Message"`
	Timestamp         string             `json:"Timestamp"`
	MessageAttributes map[string]snsAttr `json:"MessageAttributes"`
	Token             string             `json:"Token"`
	SubscribeURL      string             `json:"SubscribeURL"`
	SignatureVersion  string             `json:"SignatureVersion"`
	Signature         string             `json:"Signature"`
	SigningCertURL    string             `json:"SigningCertURL"`
}

type ebEnvelope struct {
	ID         string          `json:"id"`
	DetailType *string         `json:"detail-type"`
	Source     string          `json:"source"`
	Time       string          `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

// Parse reads an SNS or EventBridge envelope from body. It returns a nil
// Envelope (and no error) when body is not an envelope at all, and an
// error wrapping [ErrMalformed] when body is an envelope that cannot be
// read. The inner body is the SNS Message, or the EventBridge detail as
// JSON text; the attributes are the SNS MessageAttributes (binary values
// decoded from base64). A SubscriptionConfirmation or
// UnsubscribeConfirmation is an Envelope of that Type whose body is its
// text. Parse checks no signature: see [Verifier.Verify].
func Parse(body string) (*Envelope, string, map[string]types.MessageAttributeValue, error) {
	env, inner, attrs, _, err := parse(body)
	return env, inner, attrs, err
}

// parse is [Parse] that also returns the SNS message as read, for its
// signature to be checked against exactly what the handler will see.
func parse(body string) (*Envelope, string, map[string]types.MessageAttributeValue, *snsEnvelope, error) {
	b := bytes.TrimSpace([]byte(body))
	if len(b) == 0 || b[0] != '{' {
		return nil, "", nil, nil, nil
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, "", nil, nil, nil // not a JSON object: not an envelope
	}
	_, hasTopic := probe["TopicArn"]
	_, hasType := probe["Type"]
	_, hasDetailType := probe["detail-type"]
	_, hasDetail := probe["detail"]
	switch {
	case hasTopic && hasType:
		return parseSNS(b)
	case hasDetailType && hasDetail:
		env, inner, attrs, err := parseEventBridge(b)
		return env, inner, attrs, nil, err
	}
	return nil, "", nil, nil, nil
}

func parseSNS(b []byte) (*Envelope, string, map[string]types.MessageAttributeValue, *snsEnvelope, error) {
	var e snsEnvelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, "", nil, nil, fmt.Errorf("%w: SNS notification: %v", ErrMalformed, err)
	}
	switch {
	case e.Type != typeNotification && e.Type != typeSubscribe && e.Type != typeUnsubscribe:
		return nil, "", nil, nil, fmt.Errorf("%w: SNS message of type %q, want Notification, SubscriptionConfirmation or UnsubscribeConfirmation", ErrMalformed, e.Type)
	case e.MessageID == "":
		return nil, "", nil, nil, fmt.Errorf("%w: SNS %s without MessageId", ErrMalformed, e.Type)
	case e.Message == nil:
		return nil, "", nil, nil, fmt.Errorf("%w: SNS %s %q without Message", ErrMalformed, e.Type, e.MessageID)
	}
	env := &Envelope{Kind: SNS, Type: e.Type, ID: e.MessageID, Topic: e.TopicArn, Subject: aws.ToString(e.Subject)}
	if e.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			return nil, "", nil, nil, fmt.Errorf("%w: SNS %s %q: Timestamp %q", ErrMalformed, e.Type, e.MessageID, e.Timestamp)
		}
		env.Time = t
	}
	attrs := make(map[string]types.MessageAttributeValue, len(e.MessageAttributes))
	for name, a := range e.MessageAttributes {
		switch {
		case a.Type == "":
			return nil, "", nil, nil, fmt.Errorf("%w: SNS notification %q: attribute %q has no Type", ErrMalformed, e.MessageID, name)
		case a.Type == "Binary" || strings.HasPrefix(a.Type, "Binary."):
			v, err := base64.StdEncoding.DecodeString(a.Value)
			if err != nil {
				return nil, "", nil, nil, fmt.Errorf("%w: SNS notification %q: binary attribute %q is not base64", ErrMalformed, e.MessageID, name)
			}
			attrs[name] = types.MessageAttributeValue{DataType: aws.String(a.Type), BinaryValue: v}
		default: // String, Number, String.Array and custom String.x / Number.x types
			attrs[name] = types.MessageAttributeValue{DataType: aws.String(a.Type), StringValue: aws.String(a.Value)}
		}
	}
	return env, *e.Message, attrs, &e, nil
}

func parseEventBridge(b []byte) (*Envelope, string, map[string]types.MessageAttributeValue, error) {
	var e ebEnvelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, "", nil, fmt.Errorf("%w: EventBridge event: %v", ErrMalformed, err)
	}
	switch {
	case e.ID == "":
		return nil, "", nil, fmt.Errorf("%w: EventBridge event without id", ErrMalformed)
	case e.Source == "":
		return nil, "", nil, fmt.Errorf("%w: EventBridge event %s without source", ErrMalformed, e.ID)
	case len(e.Detail) == 0 || string(e.Detail) == "null":
		return nil, "", nil, fmt.Errorf("%w: EventBridge event %s without detail", ErrMalformed, e.ID)
	}
	env := &Envelope{Kind: EventBridge, ID: e.ID, Source: e.Source, DetailType: aws.ToString(e.DetailType)}
	if e.Time != "" {
		t, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%w: EventBridge event %s: time %q", ErrMalformed, e.ID, e.Time)
		}
		env.Time = t
	}
	return env, string(e.Detail), map[string]types.MessageAttributeValue{}, nil
}
