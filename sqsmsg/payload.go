package sqsmsg

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sqsonce/sqsonce/deadletter"
)

// ClassPayload is the failure class of a message whose body could not be
// had for good: its S3 object or bucket is missing, its pointer or its
// compression does not parse, it is over [PayloadConfig.MaxBytes], or
// no S3 client was configured to fetch it.
const ClassPayload = deadletter.ClassPayload

// S3API is the part of the S3 client the consumer and the Lambda adapter
// use for bodies stored in S3: GetObject before the handler runs, and
// DeleteObject after the ack when [PayloadConfig.DeleteAfterAck] is set.
// *s3.Client satisfies it.
type S3API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

var _ S3API = (*s3.Client)(nil)

// PayloadConfig says how bodies that did not travel in the message are
// read before the handler runs: a body stored in S3 behind a pointer (by
// the producer's PayloadConfig, or by AWS's extended client libraries for
// Java and Python, whose format it is), and a compressed body (attribute
// sqsonce-encoding). The handler, the KeyFunc and the dedupe middleware
// see the body as its producer sent it ([Message.Body]); the message
// keeps its attributes, and a dead letter its pointer
// ([Message.WireBody]), never a copy of the body.
//
// A missing object or bucket, a pointer or compressed body that does not
// parse, a body over MaxBytes, or a pointer met without S3Client is a
// permanent failure (dead-lettered now, class [ClassPayload], the reason
// naming the object); any other failure to read the object (throttling,
// a network error, access refused) is retried like a handler's error.
// See "Large messages, delays and compression" in the README.
type PayloadConfig struct {
	// S3Client fetches bodies stored in S3. Defaults to nil: a message
	// with a pointer is dead-lettered with a reason that says to set it.
	S3Client S3API
	// MaxBytes caps a body fetched or decompressed: a larger one is not
	// read further and is dead-lettered. Each handler running holds its
	// message's body, so Concurrency × MaxBytes bounds the memory bodies
	// take. Defaults to 64 MiB.
	MaxBytes int64
	// DeleteAfterAck deletes a message's S3 object once the message is
	// deleted after success (ack or duplicate). A dead-lettered message
	// keeps its object. Defaults to false: other subscribers of a topic,
	// a redrive or a copy SQS delivers again may still need it; an S3
	// lifecycle rule removes objects after the queue's retention instead.
	// With it on, a copy delivered again after the delete (standard
	// queues deliver at least once) finds no object and is dead-lettered,
	// its effect already done. The Lambda adapter does not support it
	// (Lambda deletes the message after the invocation returns).
	DeleteAfterAck bool
}
