package settle

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/printable"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqserr"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// Message is what a dead letter needs of a received message.
type Message struct {
	ID           string
	Body         string
	Key          string // the dedupe key; "" for none
	GroupID      string // FIFO only
	ReceiveCount int
	// Attempts is how many times the message ran, this time included
	// (consumer.Message.Attempt); 0 means ReceiveCount.
	Attempts   int
	Attributes map[string]types.MessageAttributeValue
}

// attempts is m's Attempts, else its ReceiveCount, at least 1.
func (m Message) attempts() int {
	if m.Attempts > 0 {
		return m.Attempts
	}
	return max(m.ReceiveCount, 1)
}

// Letter is one dead letter to send.
type Letter struct {
	Msg Message
	// Reason is the failure's text (deadletter.Failure.Error); Class its
	// class, "" meaning deadletter.ClassPermanent.
	Reason, Class string
	// Step is the handler's step the failure names (deadletter.Failure.Step;
	// see [Step]), "" for none.
	Step string
	// SourceQueue and DLQ are the URLs of the queue the message failed on
	// and of its dead-letter queue; FIFO tells that the DLQ is FIFO.
	SourceQueue, DLQ string
	FIFO             bool
	// MaxSize is the DLQ's MaximumMessageSize, 0 when not known.
	MaxSize int
	// Now is the failure's time.
	Now time.Time
	// SigningKey, when set, signs the failure record (see
	// deadletter.Failure.Sign).
	SigningKey []byte
}

// Send sends l, shrunk to fit the DLQ if need be, logging (at warning
// level, with the prefix naming the runtime, e.g. "consumer") the
// attributes it drops and the dead letter once sent. Its error, wrapping
// [ErrDeadLetterRefused] when SQS will not take it at all, is for
// [DeadLetterFailed].
func Send(ctx context.Context, client DeadLetterSender, log *zap.Logger, prefix string, l Letter) error {
	m := l.Msg
	if dropped := DroppedAttributes(m.Attributes); len(dropped) > 0 {
		log.Warn(prefix+": dead letter drops attributes to stay within SQS's limit of 10",
			zap.String("message_id", m.ID), zap.Strings("dropped", dropped))
	}
	in := DeadLetterInput(m, l.Reason, l.Class, l.SourceQueue, l.DLQ, l.FIFO, l.Now)
	SetStep(in, l.Step)
	signFailure(in, l.SigningKey)
	dropped, err := SendDeadLetter(ctx, client, in, l.MaxSize)
	if len(dropped) > 0 {
		log.Warn(prefix+": dead letter shrunk to fit the dead-letter queue's MaximumMessageSize",
			zap.String("message_id", m.ID), zap.Strings("dropped", dropped))
	}
	if err != nil {
		return fmt.Errorf("%s: send to dead-letter queue %s: %w", prefix, l.DLQ, err)
	}
	log.Warn(prefix+": dead-lettered", zap.String("message_id", m.ID), zap.String("key", m.Key),
		zap.String("class", cmp.Or(l.Class, deadletter.ClassPermanent)), zap.String("reason", LogText(l.Reason)),
		zap.Int("receive_count", m.ReceiveCount))
	return nil
}

// maxLogText bounds outside text (an error's, a reason's) in a log line.
const maxLogText = 1024

// LogText is outside text (a handler's error, which may quote its input)
// as a log line carries it: cut to 1 KiB and escaped
// (printable.Escape), so that it can neither flood the log nor act on a
// terminal. Never pass a message body.
func LogText(s string) string { return printable.Escape(truncate(s, maxLogText)) }

// maxReasonLen bounds Failure.Error so a long error cannot push a dead
// letter over SQS's message size limit.
const maxReasonLen = 2048

// DeadLetterInput builds the SendMessage call that dead-letters msg to
// dlqURL: the body unchanged, the original message attributes kept, a
// sqsonce-failure attribute (JSON deadletter.Failure) added or replaced,
// and sqsonce-id added when absent (msg.Key, else the MessageId). On a
// FIFO DLQ the MessageGroupId is kept and the original MessageId is the
// MessageDeduplicationId, so a retried send cannot duplicate.
//
// SQS allows 10 attributes per message. When the original attributes
// leave no room for the ones sqsonce adds, the redrive history
// (sqsonce-redrive) goes first, then the original attributes whose names
// sort last (sqsonce-id and sqsonce-failure are always kept; other
// sqsonce-* names go last): the dead letter is never refused for want of
// room. [DroppedAttributes] tells which ones a given message
// would lose.
func DeadLetterInput(msg Message, reason, class, sourceQueueURL, dlqURL string, fifo bool, now time.Time) *sqs.SendMessageInput {
	reason = truncate(reason, maxReasonLen)
	f := deadletter.Failure{
		Error:             reason,
		Class:             cmp.Or(class, deadletter.ClassPermanent),
		SourceQueue:       sourceQueueURL,
		Attempts:          msg.attempts(),
		OriginalMessageID: msg.ID,
		FailedAt:          now.UTC(),
	}
	fj, _ := json.Marshal(f) // a Failure always marshals

	attrs := make(map[string]types.MessageAttributeValue, sqslimits.MaxMessageAttributes)
	for name, v := range msg.Attributes {
		attrs[name] = types.MessageAttributeValue{
			DataType:    v.DataType,
			StringValue: v.StringValue,
			BinaryValue: v.BinaryValue,
		}
	}
	if aws.ToString(attrs[deadletter.AttrID].StringValue) == "" {
		id := cmp.Or(msg.Key, msg.ID)
		attrs[deadletter.AttrID] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(id)}
	}
	attrs[deadletter.AttrFailure] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(fj))}
	for _, name := range droppable(attrs, sqslimits.MaxMessageAttributes) {
		delete(attrs, name)
	}

	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(dlqURL),
		MessageBody:       aws.String(msg.Body),
		MessageAttributes: attrs,
	}
	if fifo {
		in.MessageGroupId = aws.String(cmp.Or(msg.GroupID, msg.Key))
		in.MessageDeduplicationId = aws.String(msg.ID)
	}
	return in
}

// Lengths the failure's reason is cut to, in turn, by [FitDeadLetter].
var fitReasonLens = []int{256, 64}

// ErrDeadLetterRefused is wrapped by the error of [SendDeadLetter] when SQS
// will not take a dead letter whatever is tried: it is larger than the
// dead-letter queue's MaximumMessageSize even once shrunk, or SQS refuses
// its contents. Sending it again cannot help: the message is best left to
// the source queue's maxReceiveCount.
var ErrDeadLetterRefused = errors.New("dead letter refused")

// FitDeadLetter shrinks a dead letter built by [DeadLetterInput] until it
// is at most maxSize bytes as SQS counts them (the body, plus each message
// attribute's name, data type and value); maxSize is the dead-letter
// queue's MaximumMessageSize, 0 meaning SQS's largest message, 1 MiB.
// What sqsonce adds goes first: the failure's reason is cut to 256, then
// 64 bytes. Then the original attributes are dropped one at a time by the
// rule of [DeadLetterInput] (sqsonce-redrive first, then names that sort
// last, other sqsonce-* names last, sqsonce-id and sqsonce-failure never). The body is never changed.
// It returns the names of the dropped attributes and whether in now fits.
func FitDeadLetter(in *sqs.SendMessageInput, maxSize int) (dropped []string, fits bool) {
	if maxSize <= 0 {
		maxSize = sqslimits.MaxMessageBytes
	}
	if messageSize(in) <= maxSize {
		return nil, true
	}
	if v, ok := in.MessageAttributes[deadletter.AttrFailure]; ok {
		var f deadletter.Failure
		if json.Unmarshal([]byte(aws.ToString(v.StringValue)), &f) == nil {
			for _, n := range fitReasonLens {
				f.Error = truncate(f.Error, n)
				fj, _ := json.Marshal(f)
				v.StringValue = aws.String(string(fj))
				in.MessageAttributes[deadletter.AttrFailure] = v
				if messageSize(in) <= maxSize {
					return nil, true
				}
			}
		}
	}
	order := droppable(in.MessageAttributes, 0)
	for _, name := range order {
		delete(in.MessageAttributes, name)
		dropped = append(dropped, name)
		if messageSize(in) <= maxSize {
			return dropped, true
		}
	}
	return dropped, false
}

// DeadLetterSender is the call [SendDeadLetter] makes; *sqs.Client and
// the runtimes' SQS clients satisfy it.
type DeadLetterSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SendDeadLetter sends a dead letter built by [DeadLetterInput], fitted
// first to maxSize (the dead-letter queue's MaximumMessageSize, 0 when not
// known; see [FitDeadLetter]). When SQS refuses it all the same (its limit
// was not known, or it objects to something else), it is shrunk as far as
// it goes and sent once more. It returns the names of the attributes
// dropped, and an error wrapping [ErrDeadLetterRefused] when the dead
// letter cannot be sent at all; any other error (throttling, network) may
// succeed on a later try.
func SendDeadLetter(ctx context.Context, client DeadLetterSender, in *sqs.SendMessageInput, maxSize int) (dropped []string, err error) {
	dropped, fits := FitDeadLetter(in, maxSize)
	if !fits {
		return dropped, fmt.Errorf("%w: %d bytes even with its reason cut and its attributes dropped, more than the dead-letter queue's MaximumMessageSize of %d",
			ErrDeadLetterRefused, messageSize(in), cmp.Or(maxSize, sqslimits.MaxMessageBytes))
	}
	_, err = client.SendMessage(ctx, in, sdkhttp.SQS)
	if err == nil || !sqserr.MessageRefused(err) {
		return dropped, err
	}
	before := messageSize(in)
	more, _ := FitDeadLetter(in, 1) // as small as it goes
	if messageSize(in) == before {
		return dropped, fmt.Errorf("%w: %w", ErrDeadLetterRefused, err)
	}
	dropped = append(dropped, more...)
	if _, err2 := client.SendMessage(ctx, in, sdkhttp.SQS); err2 != nil {
		if sqserr.MessageRefused(err2) {
			return dropped, fmt.Errorf("%w, even shrunk to %d bytes: %w", ErrDeadLetterRefused, messageSize(in), err2)
		}
		return dropped, err2
	}
	return dropped, nil
}

// messageSize is SQS's size of a message: its body plus each message
// attribute's name, data type and value.
func messageSize(in *sqs.SendMessageInput) int {
	n := len(aws.ToString(in.MessageBody))
	for name, v := range in.MessageAttributes {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut
// with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// DroppedAttributes returns the names of a message's attributes that
// [DeadLetterInput] drops to stay within SQS's 10-attribute limit (usually
// none).
func DroppedAttributes(attrs map[string]types.MessageAttributeValue) []string {
	names := make(map[string]types.MessageAttributeValue, len(attrs)+2)
	for k, v := range attrs {
		names[k] = v
	}
	names[deadletter.AttrID] = types.MessageAttributeValue{}
	names[deadletter.AttrFailure] = types.MessageAttributeValue{}
	return droppable(names, sqslimits.MaxMessageAttributes)
}

// attrRedrive is the redrive tool's history attribute (redrive.AttrRedrive,
// which imports this package): the redrive writes it again on each move,
// where room is left, so it is the first to go.
const attrRedrive = "sqsonce-redrive"

// droppable lists, in the order they go, the attributes to remove so that
// at most keep remain: never sqsonce-id, sqsonce-failure, nor those that
// say how to read the body (ExtendedPayloadSize, SQSLargePayloadSize,
// sqsonce-encoding); sqsonce-redrive
// first (the next redrive writes it again, while a producer's attribute
// dropped from a dead letter is lost for good across fail and redrive
// cycles); then other names last in sort order first, other sqsonce-*
// names only when that is not enough.
func droppable(attrs map[string]types.MessageAttributeValue, keep int) []string {
	extra := len(attrs) - keep
	if extra <= 0 {
		return nil
	}
	var first, plain, ours []string
	for name := range attrs {
		switch {
		case name == deadletter.AttrID || name == deadletter.AttrFailure || payload.Reserved(name):
			// The pointer and encoding attributes say how to read the
			// body: without them it is unreadable.
		case name == attrRedrive:
			first = append(first, name)
		case strings.HasPrefix(name, "sqsonce-"):
			ours = append(ours, name)
		default:
			plain = append(plain, name)
		}
	}
	slices.Sort(plain)
	slices.Reverse(plain)
	slices.Sort(ours)
	slices.Reverse(ours)
	names := append(append(first, plain...), ours...)
	return names[:min(extra, len(names))]
}
