package consumer

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/msgstate"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// ClassPayload is the failure class of a message whose body could not be
// had for good ([sqsmsg.ClassPayload]).
const ClassPayload = sqsmsg.ClassPayload

// S3API is the part of the S3 client the consumer uses for bodies stored
// in S3 ([sqsmsg.S3API]). *s3.Client satisfies it.
type S3API = sqsmsg.S3API

// PayloadConfig says how bodies that did not travel in the message are
// read before the handler runs ([sqsmsg.PayloadConfig]).
type PayloadConfig = sqsmsg.PayloadConfig

// checkPayload refuses settings that cannot work.
func checkPayload(c PayloadConfig) error {
	if c.MaxBytes < 0 {
		return errors.New("consumer: Payload.MaxBytes must not be negative")
	}
	if c.DeleteAfterAck && c.S3Client == nil {
		return errors.New("consumer: Payload.DeleteAfterAck needs Payload.S3Client (an *s3.Client)")
	}
	return nil
}

// deleteObjects deletes the S3 objects of messages acked with
// DeleteAfterAck set, once their delete from the queue succeeded. A
// failure is logged: the object stays for the lifecycle rule.
func (s *batcher) deleteObjects(ops []batchOp) {
	if s.objects == nil {
		return
	}
	for _, op := range ops {
		if op.visibility >= 0 || !msgstate.DropObject(op.msg) || msgstate.Object(op.msg) == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
		err := payload.Delete(ctx, s.objects, *msgstate.Object(op.msg))
		cancel()
		if err != nil {
			s.log.Warn("consumer: deleting an acked message's S3 object failed; it stays until the bucket's lifecycle rule removes it",
				zap.String("message_id", op.msg.ID), zap.String("object", msgstate.Object(op.msg).String()), zap.Error(err))
		}
	}
}
