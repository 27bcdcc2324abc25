package producer

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/payload"
)

// Attributes the payload settings add to a message. They count toward
// SQS's 10 attributes, and a message's own attributes may not use them.
const (
	// AttrPayloadSize marks a message whose body is in S3 and carries the
	// stored body's size: the attribute AWS's extended client libraries
	// write and read.
	AttrPayloadSize = payload.AttrSize
	// AttrEncoding marks a compressed body ("zstd": base64 of a zstd
	// frame).
	AttrEncoding = payload.AttrEncoding
)

// S3API is the S3 call a Producer makes to store a large body.
// *s3.Client satisfies it.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ S3API = (*s3.Client)(nil)

// PayloadConfig sends bodies SQS cannot take through S3, and compresses
// bodies, so that consumers built with sqsonce (the consumer, the Lambda
// adapter) get the body as it was given, before their handler runs. Both
// are off by default. See docs/large-messages.md.
//
// A body stored in S3 travels as a pointer in the format of AWS's
// extended client libraries for Java and Python: the body
// ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"…","s3Key":"…"}]
// and the Number attribute ExtendedPayloadSize, so those libraries read
// sqsonce's messages (and sqsonce reads theirs). A compressed body is not
// readable by them.
type PayloadConfig struct {
	// S3Client stores the bodies of messages over OffloadAbove in Bucket
	// (one PutObject each, before the send) and the message carries a
	// pointer to the object. Defaults to nil: a message too large for the
	// queue fails with ErrTooLarge.
	S3Client S3API
	// Bucket is where bodies are stored. Required with S3Client.
	Bucket string
	// KeyPrefix starts each object's key, which ends in a random UUID (a
	// new object per send). Letters, digits, '.', '/', '_' and '-', not
	// starting with '.' or '/' (the Java client's rule). Defaults to "".
	KeyPrefix string
	// OffloadAbove is the size of a message (its body and attributes, as
	// SQS counts them) above which its body goes to S3. Defaults to the
	// queue's MaximumMessageSize: only what would not fit. AWS's clients
	// use 262144 (256 KiB); a lower threshold sends fewer bytes through
	// SQS, which bills every 64 KiB as a request.
	OffloadAbove int
	// CompressAbove, when positive, compresses the body of each message of
	// more than that many bytes with zstd, sent as base64 text with the
	// attribute sqsonce-encoding = "zstd" (a body that does not shrink is
	// sent as it is). Compression comes first: a body still too large is
	// stored in S3 compressed. Defaults to 0: off.
	CompressAbove int
}

// check refuses a PayloadConfig that cannot work.
func (c PayloadConfig) check() error {
	switch {
	case c.OffloadAbove < 0 || c.CompressAbove < 0:
		return errors.New("producer: Payload.OffloadAbove and Payload.CompressAbove must not be negative")
	case c.S3Client == nil && (c.Bucket != "" || c.KeyPrefix != "" || c.OffloadAbove > 0):
		return errors.New("producer: Payload.Bucket, KeyPrefix and OffloadAbove need Payload.S3Client (an *s3.Client)")
	case c.S3Client != nil && c.Bucket == "":
		return errors.New("producer: Payload.S3Client needs Payload.Bucket, the bucket bodies are stored in")
	}
	if c.S3Client != nil {
		if err := payload.CheckBucket(c.Bucket); err != nil {
			return fmt.Errorf("producer: Payload.Bucket: %w", err)
		}
		if err := payload.CheckKeyPrefix(c.KeyPrefix); err != nil {
			return fmt.Errorf("producer: Payload.KeyPrefix: %w", err)
		}
	}
	return nil
}

// on reports whether a body may be sent other than as it is.
func (c PayloadConfig) on() bool { return c.S3Client != nil || c.CompressAbove > 0 }

// encodePayloads compresses the bodies of msgs (those of pending, whose
// results are still open) and stores in S3 those still over the
// threshold, replacing each message's body and attributes; a message
// whose store fails gets that error. limit is the queue's
// MaximumMessageSize. It returns the indexes still to send.
func (p *Producer) encodePayloads(ctx context.Context, msgs []Message, results []Result, pending []int, limit int) []int {
	cfg := p.cfg.Payload
	threshold := limit
	if cfg.OffloadAbove > 0 {
		threshold = min(cfg.OffloadAbove, limit)
	}
	var store []int
	for _, i := range pending {
		m := msgs[i]
		if cfg.CompressAbove > 0 && len(m.Body) > cfg.CompressAbove {
			if z, ok := payload.Compress(m.Body); ok {
				m.Attributes = withAttr(m.Attributes, AttrEncoding, payload.StringAttr(payload.EncodingZstd))
				m.Body = z
			}
		}
		msgs[i] = m
		if cfg.S3Client != nil && messageSize(m, results[i].ID) > threshold {
			store = append(store, i)
		}
	}
	if len(store) == 0 {
		return pending
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.Concurrency)
	failed := make([]bool, len(msgs))
	for _, i := range store {
		g.Go(func() error {
			ptr, err := payload.Store(gctx, cfg.S3Client, cfg.Bucket, cfg.KeyPrefix, msgs[i].Body)
			if err != nil {
				results[i].Err = fmt.Errorf("producer: %w", err)
				failed[i] = true
				p.cfg.Logger.Warn("producer: storing a body in S3 failed; the message is not sent",
					zap.String("sqsonce_id", results[i].ID), zap.Error(err))
				return nil
			}
			msgs[i].Attributes = withAttr(msgs[i].Attributes, AttrPayloadSize, payload.NumberAttr(int64(len(msgs[i].Body))))
			msgs[i].Body = ptr.Body()
			return nil
		})
	}
	_ = g.Wait()
	out := pending[:0:0]
	for _, i := range pending {
		if !failed[i] {
			out = append(out, i)
		}
	}
	return out
}

// withAttr returns a copy of attrs with name set to v (the caller's map
// is never changed).
func withAttr(attrs map[string]types.MessageAttributeValue, name string, v types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	out := maps.Clone(attrs)
	if out == nil {
		out = map[string]types.MessageAttributeValue{}
	}
	out[name] = v
	return out
}

// reservedAttr returns the first attribute of attrs that the payload
// settings or a NotBefore write, or "".
func reservedAttr(attrs map[string]types.MessageAttributeValue) string {
	for name := range attrs {
		if payload.Reserved(name) || hold.Reserved(name) {
			return name
		}
	}
	return ""
}
