package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

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
		reason = res.Err.Error()
	}
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen] + "…"
	}
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
	for _, name := range droppable(attrs) {
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
	return droppable(names)
}

// droppable lists the attributes to remove so that at most
// MaxMessageAttributes remain: never sqsonce-id or sqsonce-failure; other
// names last in sort order first, other sqsonce-* names only when that is
// not enough.
func droppable(attrs map[string]types.MessageAttributeValue) []string {
	extra := len(attrs) - MaxMessageAttributes
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
