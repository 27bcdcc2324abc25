// Package delivery builds the [sqsmsg.Message] of a message SQS
// delivered: the one constructor of the consumer, the Lambda adapter,
// consumertest and the redrive tool, and the one setter of its dedupe
// key.
package delivery

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/msgstate"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// New builds a Message from an SDK message received from queueURL at
// receivedAt. Its key is [sqsmsg.DefaultKey] until [SetKey] changes it.
func New(raw types.Message, queueURL string, receivedAt time.Time) *sqsmsg.Message {
	m := new(sqsmsg.Message)
	Init(m, raw, queueURL, receivedAt)
	return m
}

// Init fills in a zero m as New does: the consumer's record of a received
// message holds its Message, so that both take one allocation.
func Init(m *sqsmsg.Message, raw types.Message, queueURL string, receivedAt time.Time) {
	m.ID = aws.ToString(raw.MessageId)
	m.Body = aws.ToString(raw.Body)
	m.Attributes = raw.MessageAttributes
	m.SystemAttributes = raw.Attributes
	m.ReceivedAt = receivedAt
	m.QueueURL = queueURL
	m.Raw = raw
	if m.Attributes == nil {
		m.Attributes = map[string]types.MessageAttributeValue{}
	}
	if m.SystemAttributes == nil {
		m.SystemAttributes = map[string]string{}
	}
	sa := m.SystemAttributes
	m.ReceiveCount, _ = strconv.Atoi(sa[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(sa[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms)
	}
	m.GroupID = sa[string(types.MessageSystemAttributeNameMessageGroupId)]
	m.DeduplicationID = sa[string(types.MessageSystemAttributeNameMessageDeduplicationId)]
	msgstate.SetKey(m, sqsmsg.DefaultKey(m))
}

// SetKey sets m's dedupe id; an empty key falls back to
// [sqsmsg.DefaultKey]. The runtimes call it with their KeyFunc's result
// before the middleware runs; the envelope middleware with the key of the
// message it unwraps.
func SetKey(m *sqsmsg.Message, key string) {
	if key == "" {
		key = sqsmsg.DefaultKey(m)
	}
	msgstate.SetKey(m, key)
}
