package settle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// MaxDelay is the longest DelaySeconds SQS takes: a re-sent copy of a
// held message is delayed at most this long.
const MaxDelay = 15 * time.Minute

// HoldAction is how to hold a message received before its not-before
// time.
type HoldAction struct {
	// Resend: send a fresh copy of the message (see [Resend]) delayed by
	// Seconds, then delete this one (the Lambda adapter reports it as a
	// success, and the event source mapping deletes it). Otherwise set
	// the message's visibility to Seconds (the Lambda adapter reports it
	// as a batch item failure).
	Resend  bool
	Seconds int32
}

// Hold decides how a message received before its not-before time is
// held: the one rule of the consumer and the Lambda adapter. A received
// message is held by SQS's own means, so that no worker keeps any state
// about it and any worker, restarted or not, can run it at its time:
//
//   - on a copy's first receive (receiveCount 1) its visibility is set to
//     the time left, at most SQS's 12 hours from the receive (less a
//     minute, as [VisibilitySeconds] keeps it), unless that receive is
//     the last the queue's maxReceiveCount allows (maxReceives, 0 for no
//     limit): SQS would move it to the dead-letter queue on the next;
//   - on any later receive (the copy was held once already, or a worker
//     died holding it) a fresh copy is sent with DelaySeconds = the time
//     left, at most 15 minutes, and this copy is deleted once it is sent.
//
// Each hold by visibility costs a receive that SQS counts against the
// queue's maxReceiveCount, and a copy is held that way at most once: the
// copy that runs has used at most one receive for holding, however long
// the delay, and a re-sent copy starts again at receive count 0. A hold
// by visibility (one call, batched) is cheaper than a re-send (a send and
// a delete) and lasts up to 12 hours instead of 15 minutes: every copy
// gets one, and a copy held once is re-sent. A delay of hours thus takes
// about one copy per 12 hours 15 minutes: its first receive 15 minutes
// after its send, held until it comes back near its time or 12 hours
// later.
//
// hop, when positive, caps both the visibility and the delay (for tests:
// hops of seconds instead of hours). received is when the receive that
// returned the message returned, now the decision's time; notBefore must
// be after now.
func Hold(notBefore time.Time, receiveCount, maxReceives int, hop time.Duration, received, now time.Time) HoldAction {
	left := notBefore.Sub(now)
	if receiveCount <= 1 && !AtReceiveLimit(receiveCount, maxReceives) {
		if hop > 0 {
			left = min(left, hop)
		}
		if secs := VisibilitySeconds(left, received, now); secs > 0 {
			return HoldAction{Seconds: secs}
		}
	}
	return HoldAction{Resend: true, Seconds: DelaySeconds(notBefore.Sub(now), hop)}
}

// DelaySeconds is the DelaySeconds of a send that is due after left: left
// rounded up to whole seconds, at most 15 minutes (or hop when positive
// and shorter), at least 1.
func DelaySeconds(left, hop time.Duration) int32 {
	limit := MaxDelay
	if hop > 0 {
		limit = min(limit, hop)
	}
	secs := (min(left, limit) + time.Second - 1) / time.Second
	return int32(max(secs, 1))
}

// HoldFallback is the visibility, in seconds, of a message whose re-send
// failed: it is held by its visibility instead (one more receive, but
// never lost), for the time left capped as [Hold] caps it; 0 when SQS's
// 12 hours from the receive are used up.
func HoldFallback(notBefore time.Time, hop time.Duration, received, now time.Time) int32 {
	left := notBefore.Sub(now)
	if hop > 0 {
		left = min(left, hop)
	}
	return VisibilitySeconds(left, received, now)
}

// Copy is a held message to send again as a fresh message.
type Copy struct {
	// QueueURL is the queue it was received from and is sent to.
	QueueURL string
	// Body is the body as SQS carried it (for a body in S3 the pointer,
	// never a copy of the body).
	Body string
	// Attributes are its message attributes as received.
	Attributes map[string]types.MessageAttributeValue
	// MessageID and SentAt are this copy's MessageId and SentTimestamp.
	MessageID string
	SentAt    time.Time
	// Delay is the new copy's DelaySeconds.
	Delay int32
}

// ErrNoRoom is returned by [Resend] for a message without an sqsonce-id
// whose ten attributes leave no room for one: a copy would get another
// dedupe key. It is held by its visibility instead.
var ErrNoRoom = errors.New("settle: the held message has no sqsonce-id and no room to add one")

// ResendInput builds the SendMessage of a re-sent copy of c: the same
// body and attributes, the not-before mark counting one more hop and
// naming the first copy's MessageId and SentTimestamp (this copy's, when
// it is the first), and an sqsonce-id (the first copy's MessageId) when
// the message had none, so that every copy has the dedupe key of the
// first.
func ResendInput(c Copy) (*sqs.SendMessageInput, error) {
	v, ok := c.Attributes[hold.Attr]
	if !ok {
		return nil, fmt.Errorf("settle: the held message has no %s attribute", hold.Attr)
	}
	mark, err := hold.Parse(aws.ToString(v.StringValue))
	if err != nil {
		return nil, err
	}
	if mark.MessageID == "" {
		mark.MessageID, mark.SentAt = c.MessageID, c.SentAt
	}
	mark.Hop++
	attrs := maps.Clone(c.Attributes)
	attrs[hold.Attr] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(mark.Value())}
	if _, ok := attrs[deadletter.AttrID]; !ok {
		if len(attrs) >= sqslimits.MaxMessageAttributes {
			return nil, ErrNoRoom
		}
		attrs[deadletter.AttrID] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(mark.MessageID)}
	}
	return &sqs.SendMessageInput{
		QueueUrl:          aws.String(c.QueueURL),
		MessageBody:       aws.String(c.Body),
		MessageAttributes: attrs,
		DelaySeconds:      c.Delay,
	}, nil
}

// Resend sends a fresh copy of c (see [ResendInput]). The caller deletes
// c only once this returned nil: a crash between the two leaves two
// copies with one sqsonce-id, which the dedupe store tells apart, never
// none.
func Resend(ctx context.Context, client DeadLetterSender, c Copy) error {
	in, err := ResendInput(c)
	if err != nil {
		return err
	}
	if _, err := client.SendMessage(ctx, in, sdkhttp.SQS); err != nil {
		return fmt.Errorf("settle: re-send held message: %w", err)
	}
	return nil
}
