package consumer

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

	"github.com/sqsonce/sqsonce/internal/sqserr"
)

// MaxMessageAttributes is SQS's limit on message attributes per message.
const MaxMessageAttributes = 10

// maxReasonLen bounds Failure.Error so a long error cannot push a dead
// letter over SQS's message size limit.
const maxReasonLen = 2048

// DeadLetterInput builds the SendMessage call that dead-letters msg to
// dlqURL: the body unchanged, the original message attributes kept, a
// sqsonce-failure attribute (JSON [Failure]) added or replaced, and
// sqsonce-id added when absent (msg.Key(), else the MessageId). On a FIFO
// DLQ the MessageGroupId is kept and the original MessageId is the
// MessageDeduplicationId, so a retried send cannot duplicate.
//
// SQS allows 10 attributes per message. When the original attributes
// leave no room for the ones sqsonce adds, the original attributes whose
// names sort last are dropped (sqsonce-id and sqsonce-failure are always
// kept; other sqsonce-* names go last): the dead letter is never refused
// for want of room. [DroppedAttributes] tells
// which ones a given message would lose.
func DeadLetterInput(msg *Message, res Result, sourceQueueURL, dlqURL string, fifo bool, now time.Time) *sqs.SendMessageInput {
	reason := res.Reason
	if reason == "" && res.Err != nil {
		reason = handlerText(res.Err)
	}
	reason = truncate(reason, maxReasonLen)
	class := res.Class
	if class == "" {
		class = ClassPermanent
	}
	f := Failure{
		Error:             reason,
		Class:             class,
		SourceQueue:       sourceQueueURL,
		Attempts:          max(msg.ReceiveCount, 1),
		OriginalMessageID: msg.ID,
		FailedAt:          now.UTC(),
	}
	fj, _ := json.Marshal(f) // a Failure always marshals

	attrs := make(map[string]types.MessageAttributeValue, MaxMessageAttributes)
	for name, v := range msg.Attributes {
		attrs[name] = types.MessageAttributeValue{
			DataType:    v.DataType,
			StringValue: v.StringValue,
			BinaryValue: v.BinaryValue,
		}
	}
	if aws.ToString(attrs[AttrID].StringValue) == "" {
		id := msg.Key()
		if id == "" {
			id = msg.ID
		}
		attrs[AttrID] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(id)}
	}
	attrs[AttrFailure] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(fj))}
	for _, name := range droppable(attrs, MaxMessageAttributes) {
		delete(attrs, name)
	}

	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(dlqURL),
		MessageBody:       aws.String(msg.Body),
		MessageAttributes: attrs,
	}
	if fifo {
		group := msg.GroupID
		if group == "" {
			group = msg.Key()
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(msg.ID)
	}
	return in
}

// MaxMessageSize is SQS's largest message, and the default
// MaximumMessageSize of a queue: 1 MiB.
const MaxMessageSize = 1 << 20

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
// queue's MaximumMessageSize, 0 meaning [MaxMessageSize]. What sqsonce
// adds goes first: the failure's reason is cut to 256, then 64 bytes. Then
// the original attributes are dropped one at a time by the rule of
// [DeadLetterInput] (names that sort last first, other sqsonce-* names
// last, sqsonce-id and sqsonce-failure never). The body is never changed.
// It returns the names of the dropped attributes and whether in now fits.
func FitDeadLetter(in *sqs.SendMessageInput, maxSize int) (dropped []string, fits bool) {
	if maxSize <= 0 {
		maxSize = MaxMessageSize
	}
	if messageSize(in) <= maxSize {
		return nil, true
	}
	if v, ok := in.MessageAttributes[AttrFailure]; ok {
		var f Failure
		if json.Unmarshal([]byte(aws.ToString(v.StringValue)), &f) == nil {
			for _, n := range fitReasonLens {
				f.Error = truncate(f.Error, n)
				fj, _ := json.Marshal(f)
				v.StringValue = aws.String(string(fj))
				in.MessageAttributes[AttrFailure] = v
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
// [SQSAPI] satisfy it.
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
			ErrDeadLetterRefused, messageSize(in), cmp.Or(maxSize, MaxMessageSize))
	}
	_, err = client.SendMessage(ctx, in)
	if err == nil || !sqserr.MessageRefused(err) {
		return dropped, err
	}
	before := messageSize(in)
	more, _ := FitDeadLetter(in, 1) // as small as it goes
	if messageSize(in) == before {
		return dropped, fmt.Errorf("%w: %w", ErrDeadLetterRefused, err)
	}
	dropped = append(dropped, more...)
	if _, err2 := client.SendMessage(ctx, in); err2 != nil {
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

// DroppedAttributes returns the names of msg's attributes that
// [DeadLetterInput] drops to stay within SQS's 10-attribute limit (usually
// none).
func DroppedAttributes(msg *Message) []string {
	names := make(map[string]types.MessageAttributeValue, len(msg.Attributes)+2)
	for k, v := range msg.Attributes {
		names[k] = v
	}
	names[AttrID] = types.MessageAttributeValue{}
	names[AttrFailure] = types.MessageAttributeValue{}
	return droppable(names, MaxMessageAttributes)
}

// droppable lists, in the order they go, the attributes to remove so that
// at most keep remain: never sqsonce-id or sqsonce-failure; other names
// last in sort order first, other sqsonce-* names only when that is not
// enough.
func droppable(attrs map[string]types.MessageAttributeValue, keep int) []string {
	extra := len(attrs) - keep
	if extra <= 0 {
		return nil
	}
	var plain, ours []string
	for name := range attrs {
		switch {
		case name == AttrID || name == AttrFailure:
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
	names := append(plain, ours...)
	return names[:min(extra, len(names))]
}

// ResolveDeadLetterQueue reads queueURL's RedrivePolicy and returns its
// dead-letter queue's URL and whether that queue is FIFO. It returns "" and
// no error when the queue has no RedrivePolicy.
func ResolveDeadLetterQueue(ctx context.Context, client SQSAPI, queueURL string) (dlqURL string, fifo bool, err error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return "", false, fmt.Errorf("consumer: read redrive policy of %s: %w", queueURL, err)
	}
	return resolveRedrivePolicy(ctx, client, out.Attributes[string(types.QueueAttributeNameRedrivePolicy)])
}

func resolveRedrivePolicy(ctx context.Context, client SQSAPI, policy string) (dlqURL string, fifo bool, err error) {
	if policy == "" {
		return "", false, nil
	}
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(policy), &rp); err != nil {
		return "", false, fmt.Errorf("consumer: parse redrive policy %q: %w", policy, err)
	}
	if rp.DeadLetterTargetArn == "" {
		return "", false, nil
	}
	// arn:partition:sqs:region:account:name
	parts := strings.SplitN(rp.DeadLetterTargetArn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", false, fmt.Errorf("consumer: redrive policy: %q is not an SQS queue ARN", rp.DeadLetterTargetArn)
	}
	name, account := parts[5], parts[4]
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(name)}
	if account != "" {
		in.QueueOwnerAWSAccountId = aws.String(account)
	}
	out, err := client.GetQueueUrl(ctx, in)
	if err != nil {
		if isQueueMissing(err) {
			return "", false, fmt.Errorf("consumer: the dead-letter queue %s named in the redrive policy does not exist: create it or fix the policy: %w", rp.DeadLetterTargetArn, err)
		}
		return "", false, fmt.Errorf("consumer: resolve dead-letter queue %s: %w", rp.DeadLetterTargetArn, err)
	}
	return aws.ToString(out.QueueUrl), strings.HasSuffix(name, ".fifo"), nil
}

// isQueueMissing reports whether err says the queue does not exist.
var isQueueMissing = sqserr.QueueMissing
