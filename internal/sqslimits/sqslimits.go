// Package sqslimits holds the limits Amazon SQS documents for the calls
// sqsonce makes, defined once so that every package checks the same
// numbers. See the SQS Developer Guide's "Amazon SQS quotas" pages.
package sqslimits

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const (
	// MaxBatchEntries is the most entries one batch request
	// (SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch)
	// takes, and the most messages one ReceiveMessage returns.
	MaxBatchEntries = 10
	// MaxMessageAttributes is the most message attributes one message
	// carries.
	MaxMessageAttributes = 10
	// MaxMessageBytes is the largest message (body plus attribute names,
	// types and values), and also the largest SendMessageBatch payload.
	MaxMessageBytes = 1 << 20
	// MaxVisibility is the longest visibility timeout, and the longest a
	// received message can stay invisible counting every extension.
	MaxVisibility = 12 * time.Hour
	// MaxVisibilitySeconds is MaxVisibility in the seconds the API takes.
	MaxVisibilitySeconds = int32(MaxVisibility / time.Second)
	// MaxWaitTime is the longest long-poll wait of a ReceiveMessage.
	MaxWaitTime = 20 * time.Second
	// MaxWaitTimeSeconds is MaxWaitTime in the seconds the API takes.
	MaxWaitTimeSeconds = int32(MaxWaitTime / time.Second)
	// MaxRetention is the longest message retention period of a queue.
	MaxRetention = 14 * 24 * time.Hour
	// MinRetention is the shortest message retention period of a queue.
	MinRetention = time.Minute
)

// MessageSize is a message's size as SQS counts it against
// [MaxMessageBytes] (and a queue's MaximumMessageSize) and against the
// payload of a SendMessageBatch: the body's bytes plus, for each message
// attribute, the bytes of its name, its data type and its value.
func MessageSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, v := range attrs {
		n += AttributeSize(name, v)
	}
	return n
}

// AttributeSize is one message attribute's part of [MessageSize]: the
// bytes of its name, its data type and its value.
func AttributeSize(name string, v types.MessageAttributeValue) int {
	return len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
}
