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

// decode replaces msg's body by the one its producer sent, when it came
// in S3 or compressed; msg keeps the body SQS carried for its dead letter.
// Its error is a *payload.Error: permanent ones have FailureClass
// ClassPayload.
func (p *Processor) decode(ctx context.Context, msg *sqsmsg.Message) error {
	if !payload.Needed(msg.Attributes) {
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
