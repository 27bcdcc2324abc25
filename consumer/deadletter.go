package consumer

import (
	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqserr"
)

// ErrDeadLetterRefused is the error (wrapped) that Observer.DeadLetterRefused
// gets when SQS will not take a dead letter whatever is tried: it is larger
// than the dead-letter queue's MaximumMessageSize even once shrunk, or SQS
// refuses its contents. Sending it again cannot help: the message is retried
// after the backoff's ceiling and left to the source queue's
// maxReceiveCount.
var ErrDeadLetterRefused = settle.ErrDeadLetterRefused

// settleMessage is what a dead letter needs of m.
func settleMessage(m *Message) settle.Message {
	return settle.Message{ID: m.ID, Body: m.WireBody(), Key: m.Key(), GroupID: m.GroupID, ReceiveCount: m.ReceiveCount, Attempts: m.Attempt(), Attributes: m.Attributes}
}

// deadLetterReason is the failure text recorded in res's dead letter.
func deadLetterReason(res Result) string {
	if res.Reason == "" && res.Err != nil {
		return pipeline.HandlerText(res.Err)
	}
	return res.Reason
}

// isQueueMissing reports whether err says the queue does not exist.
func isQueueMissing(err error) bool { return sqserr.QueueMissing(err) }
