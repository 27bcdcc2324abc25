// Package deadletter defines the format of sqsonce's dead letters: the
// attributes a dead-lettered message carries and the failure record in
// them. It is a leaf package: reading a dead letter (a DLQ tool, a
// dashboard, sqs-redrive) needs no consumer runtime.
//
// A dead letter is the original body with the original message
// attributes, plus:
//
//   - [AttrFailure] (String, JSON): a [Failure];
//   - [AttrID], when the message had none: its dedupe key, else its
//     MessageId.
//
// See "The dead-letter format" in docs/architecture.md.
//
//	f, ok := deadletter.ParseFailure(msg.MessageAttributes)
//	if ok {
//		fmt.Println(f.Class, f.Error)
//	}
package deadletter

import (
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Message attribute names that sqsonce reads and writes.
const (
	// AttrID carries the message's dedupe id. Producers that care about
	// exactly-once stamp it (a UUID made when the job is created); the
	// redrive tool keeps it; every dead letter carries one.
	AttrID = "sqsonce-id"
	// AttrFailure is added to dead letters: a JSON [Failure].
	AttrFailure = "sqsonce-failure"
)

// Failure classes recorded in [Failure.Class]. A handler's error may name
// its own class (consumer.FailureClasser).
const (
	ClassPermanent   = "permanent"    // the handler returned consumer.Permanent(err)
	ClassMaxAttempts = "max_attempts" // MaxAttempts transient failures
	ClassPanic       = "panic"        // counted as a transient failure; a dead letter only via MaxAttempts
	ClassKeyReuse    = "key_reuse"    // same dedupe key, different body
	ClassPayload     = "payload"      // the body in S3 or compressed could not be had for good
	// ClassOutcomeUnknown: a step's outcome outside the database is
	// unknown and its policy parks it for a person (package step);
	// Failure.Step names the step.
	ClassOutcomeUnknown = "outcome_unknown"
)

// Failure is the JSON recorded in a dead letter's sqsonce-failure attribute.
type Failure struct {
	// Error is the handler's error text, without the "permanent: " or
	// "retry after …: " prefix (Class says it), cut to stay under SQS's
	// size limit.
	Error string `json:"error"`
	// Class is why the message was dead-lettered (see ClassPermanent).
	Class string `json:"class"`
	// SourceQueue is the URL of the queue the message failed on.
	SourceQueue string `json:"source_queue"`
	// Attempts is the message's receive count when it failed.
	Attempts int `json:"attempts"`
	// OriginalMessageID is the MessageId on the source queue.
	OriginalMessageID string    `json:"original_message_id"`
	FailedAt          time.Time `json:"failed_at"`
	// Step is the name of the handler's step whose failure this is (see
	// package step): set for class outcome_unknown, and for any failure
	// whose error names its step (a FailureStep() string method).
	Step string `json:"step,omitempty"`
	// Signature is set when the consumer that wrote the record has a
	// signing key: see [Failure.Sign]. Without one, nothing tells this
	// record from one a producer wrote.
	Signature string `json:"signature,omitempty"`
}

// ParseFailure reads the sqsonce-failure attribute from a message's
// attributes; ok=false when it is absent or not valid JSON.
func ParseFailure(attrs map[string]types.MessageAttributeValue) (f Failure, ok bool) {
	s := aws.ToString(attrs[AttrFailure].StringValue)
	if s == "" {
		return Failure{}, false
	}
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return Failure{}, false
	}
	return f, true
}
