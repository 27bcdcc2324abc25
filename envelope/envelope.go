// Package envelope unwraps messages that reach SQS inside an SNS or
// EventBridge envelope, so that the handler sees the publisher's body and
// attributes and the dedupe key is the publisher's id.
//
//	c, err := consumer.New(consumer.Config{
//		QueueName:  "orders",
//		Middleware: []consumer.Middleware{envelope.Unwrap(envelope.Options{}), dedupe.Middleware(store, dedupe.Options{})},
//		Handler:    handler,
//	})
//
// Put it first, before dedupe: it sets the message's key. The key is the
// sqsonce-id attribute inside the envelope, else the SNS MessageId or the
// EventBridge event id: both are the publisher's, the same on every SQS
// delivery of that publication. A body that is not an envelope (SNS raw
// message delivery, a direct send, a message redriven from the DLQ) passes
// through unchanged, unless Options.Require is set. An envelope that
// cannot be read is a permanent failure whose reason says what is wrong.
//
// While the handler runs, msg.Body and msg.Attributes are the inner ones
// and [FromContext] describes the envelope; afterwards they are restored,
// so a dead letter carries the message exactly as it arrived (with the
// key as its sqsonce-id).
package envelope

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
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
	// KeyFunc computes the key from the unwrapped message. Defaults to the
	// inner sqsonce-id attribute, else the envelope's id.
	KeyFunc consumer.KeyFunc
}

// ErrMalformed is the error (made permanent) of an envelope that cannot be
// read.
var ErrMalformed = errors.New("envelope: malformed")

type ctxKey struct{}

// FromContext returns the envelope of the message being handled, or nil
// when it came unwrapped.
func FromContext(ctx context.Context) *Envelope {
	e, _ := ctx.Value(ctxKey{}).(*Envelope)
	return e
}

// Unwrap returns the middleware.
func Unwrap(opts Options) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			env, body, attrs, err := Parse(msg.Body)
			switch {
			case err != nil:
				return consumer.Permanent(err)
			case env == nil && opts.Require:
				return consumer.Permanent(fmt.Errorf("%w: the body is neither an SNS notification nor an EventBridge event", ErrMalformed))
			case env == nil:
				return next.Handle(ctx, msg)
			}
			origBody, origAttrs := msg.Body, msg.Attributes
			defer func() { msg.Body, msg.Attributes = origBody, origAttrs }()
			msg.Body, msg.Attributes = body, attrs
			key := ""
			if opts.KeyFunc != nil {
				key = opts.KeyFunc(msg)
			}
			if key == "" {
				key = msg.Attribute(consumer.AttrID)
			}
			if key == "" {
				key = env.ID
			}
			msg.SetKey(key)
			return next.Handle(context.WithValue(ctx, ctxKey{}, env), msg)
		})
	}
}

type snsAttr struct {
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

type snsEnvelope struct {
	Type              string             `json:"Type"`
	MessageID         string             `json:"MessageId"`
	TopicArn          string             `json:"TopicArn"`
	Subject           string             `json:"Subject"`
	Message           *string            `json:"Message"`
	Timestamp         string             `json:"Timestamp"`
	MessageAttributes map[string]snsAttr `json:"MessageAttributes"`
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
// decoded from base64).
func Parse(body string) (*Envelope, string, map[string]types.MessageAttributeValue, error) {
	b := bytes.TrimSpace([]byte(body))
	if len(b) == 0 || b[0] != '{' {
		return nil, "", nil, nil
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, "", nil, nil // not a JSON object: not an envelope
	}
	_, hasTopic := probe["TopicArn"]
	_, hasType := probe["Type"]
	_, hasDetailType := probe["detail-type"]
	_, hasDetail := probe["detail"]
	switch {
	case hasTopic && hasType:
		return parseSNS(b)
	case hasDetailType && hasDetail:
		return parseEventBridge(b)
	}
	return nil, "", nil, nil
}

func parseSNS(b []byte) (*Envelope, string, map[string]types.MessageAttributeValue, error) {
	var e snsEnvelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, "", nil, fmt.Errorf("%w: SNS notification: %v", ErrMalformed, err)
	}
	switch {
	case e.Type != "Notification":
		return nil, "", nil, fmt.Errorf("%w: SNS message of type %q, want Notification", ErrMalformed, e.Type)
	case e.MessageID == "":
		return nil, "", nil, fmt.Errorf("%w: SNS notification without MessageId", ErrMalformed)
	case e.Message == nil:
		return nil, "", nil, fmt.Errorf("%w: SNS notification %s without Message", ErrMalformed, e.MessageID)
	}
	env := &Envelope{Kind: SNS, ID: e.MessageID, Topic: e.TopicArn, Subject: e.Subject}
	if e.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%w: SNS notification %s: Timestamp %q", ErrMalformed, e.MessageID, e.Timestamp)
		}
		env.Time = t
	}
	attrs := make(map[string]types.MessageAttributeValue, len(e.MessageAttributes))
	for name, a := range e.MessageAttributes {
		switch {
		case a.Type == "":
			return nil, "", nil, fmt.Errorf("%w: SNS notification %s: attribute %q has no Type", ErrMalformed, e.MessageID, name)
		case a.Type == "Binary" || strings.HasPrefix(a.Type, "Binary."):
			v, err := base64.StdEncoding.DecodeString(a.Value)
			if err != nil {
				return nil, "", nil, fmt.Errorf("%w: SNS notification %s: binary attribute %q is not base64", ErrMalformed, e.MessageID, name)
			}
			attrs[name] = types.MessageAttributeValue{DataType: aws.String(a.Type), BinaryValue: v}
		default: // String, Number, String.Array and custom String.x / Number.x types
			attrs[name] = types.MessageAttributeValue{DataType: aws.String(a.Type), StringValue: aws.String(a.Value)}
		}
	}
	return env, *e.Message, attrs, nil
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
