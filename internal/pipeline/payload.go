package pipeline

import (
	"context"

	"github.com/sqsonce/sqsonce/internal/msgstate"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// decoder is the payload decoder c configures.
func decoder(c sqsmsg.PayloadConfig) payload.Decoder {
	d := payload.Decoder{MaxBytes: c.MaxBytes, Hint: ": set Payload.S3Client (an *s3.Client) in the consumer's or Lambda adapter's Config"}
	if c.S3Client != nil {
		d.S3 = c.S3Client
	}
	return d
}

// Decode reads msg's body before Process does, for a runtime that needs
// it earlier (the consumer's Limits.KeyLimitFunc): Process then does not
// read it again. Its error is decode's; Process meets it again.
func (p *Processor) Decode(ctx context.Context, msg *sqsmsg.Message) error { return p.decode(ctx, msg) }

// decode replaces msg's body by the one its producer sent, when it came
// in S3 or compressed; msg keeps the body SQS carried for its dead letter.
// Its error is a *payload.Error: permanent ones have FailureClass
// ClassPayload. A body read already is not read again.
func (p *Processor) decode(ctx context.Context, msg *sqsmsg.Message) error {
	if _, done := msgstate.Wire(msg); done || !payload.Needed(msg.Attributes) {
		return nil
	}
	res, err := p.payload.Decode(ctx, msg.Body, msg.Attributes)
	msgstate.SetObject(msg, res.Pointer)
	if err != nil {
		return err
	}
	msgstate.SetWire(msg, msg.Body)
	msg.Body = res.Body
	return nil
}
