package producer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/producer"
)

// sqsSize is a sent entry's size as SQS counts it against
// MaximumMessageSize: the body and every attribute's name, type and value.
func sqsSize(e types.SendMessageBatchRequestEntry) int {
	n := len(aws.ToString(e.MessageBody))
	for k, v := range e.MessageAttributes {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// A queue whose MaximumMessageSize is under SQS's 1 MiB: the producer
// reads it (once) and refuses a message over it without sending it.
func TestRefusesMessagesOverTheQueuesMaximumMessageSize(t *testing.T) {
	s := &stub{maxSize: "1024"}
	p := newProducer(t, s, "https://sqs.test/1/small")
	for range 2 {
		res := p.SendBatch(context.Background(), []producer.Message{
			{ID: "big", Body: strings.Repeat("x", 2000)},
			{ID: "fits", Body: strings.Repeat("x", 900)},
		})
		if !errors.Is(res[0].Err, producer.ErrTooLarge) || res[0].Attempts != 0 {
			t.Fatalf("2000 bytes to a queue of MaximumMessageSize 1024: err %v after %d attempts, want ErrTooLarge, never sent", res[0].Err, res[0].Attempts)
		}
		if res[1].Err != nil {
			t.Fatalf("900 bytes to a queue of MaximumMessageSize 1024: %v", res[1].Err)
		}
	}
	for _, c := range s.calls {
		for _, e := range c.Entries {
			if attr(e) == "big" {
				t.Fatalf("the message over the queue's MaximumMessageSize was sent")
			}
		}
	}
	if s.attrCalls != 1 {
		t.Fatalf("%d GetQueueAttributes calls for two sends, want 1", s.attrCalls)
	}
}

// What SQS refuses in a message itself is refused before sending: body
// characters outside SQS's set, FIFO group ids over 128 characters or with
// characters other than letters, digits and punctuation.
func TestRefusesWhatSQSRefusesBeforeSending(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    producer.Message
	}{
		{"NUL in the body", producer.Message{Body: "a\x00b", GroupID: "g"}},
		{"a control character in the body", producer.Message{Body: "a\x1bb", GroupID: "g"}},
		{"invalid UTF-8 in the body", producer.Message{Body: "a\xffb", GroupID: "g"}},
		{"U+FFFE in the body", producer.Message{Body: "a\uFFFEb", GroupID: "g"}},
		{"an empty body", producer.Message{Body: "", GroupID: "g"}},
		{"a group id of 129 characters", producer.Message{Body: "ok", GroupID: strings.Repeat("g", 129)}},
		{"a space in the group id", producer.Message{Body: "ok", GroupID: "acct 1"}},
		{"a non-ASCII group id", producer.Message{Body: "ok", GroupID: "é"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &stub{}
			p := newProducer(t, s, "https://sqs.test/1/q.fifo")
			res := p.SendBatch(context.Background(), []producer.Message{tc.m, {Body: "fine \t\n\r\uD7FF\uE000\U0010FFFF", GroupID: strings.Repeat("!", 128)}})
			if res[0].Err == nil || res[0].Attempts != 0 {
				t.Fatalf("err %v after %d attempts, want refused before sending", res[0].Err, res[0].Attempts)
			}
			if res[1].Err != nil {
				t.Fatalf("a valid message beside it: %v", res[1].Err)
			}
			if len(s.calls) != 1 || len(s.calls[0].Entries) != 1 {
				t.Fatalf("%d calls, want 1 with the valid message only", len(s.calls))
			}
		})
	}
}

// The size check counts what SQS will see: the trace context's attributes
// too. A message that fits only without them is sent without them (the
// trace context is what is left out, as when there is no slot for it).
func TestSizeCheckCountsTheTraceContext(t *testing.T) {
	s := &stub{}
	p := newProducer(t, s, "https://sqs.test/1/q")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	id := "0190c1a2-7c3e-7d4f-8a5b-6c7d8e9fa0b1" // a UUID, as NewIDFunc makes
	body := strings.Repeat("x", producer.MaxMessageBytes-len(producer.AttrID)-len("String")-len(id))
	res := p.SendBatch(ctx, []producer.Message{{ID: id, Body: body}, {ID: "small", Body: "small"}})
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.ID, r.Err)
		}
	}
	for _, c := range s.calls {
		for _, e := range c.Entries {
			if n := sqsSize(e); n > producer.MaxMessageBytes {
				t.Fatalf("sent %s of %d bytes with its attributes %v, over SQS's %d", attr(e), n, keys(e.MessageAttributes), producer.MaxMessageBytes)
			}
			if _, ok := e.MessageAttributes["traceparent"]; attr(e) == "small" && !ok {
				t.Fatal("a small message was sent without the trace context")
			}
		}
	}
}

func keys(m map[string]types.MessageAttributeValue) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A message SQS refuses as the sender's fault matches ErrInvalid and is not
// retried; a refusal for access, keys or throttling does not match it. A
// whole call refused for what one of its messages holds is sent again one
// message a call, so that only that message fails.
func TestSenderFaultsAreInvalid(t *testing.T) {
	s := &stub{fn: func(_ int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		for _, e := range in.Entries {
			if aws.ToString(e.MessageBody) == "refused call" {
				return nil, &smithy.GenericAPIError{Code: "InvalidMessageContents", Fault: smithy.FaultClient}
			}
		}
		return ok(in, func(e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
			switch aws.ToString(e.MessageBody) {
			case "invalid":
				return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), SenderFault: true}
			case "kms":
				return &types.BatchResultErrorEntry{Code: aws.String("KmsAccessDenied"), SenderFault: true}
			}
			return nil
		}), nil
	}}
	p := newProducer(t, s, "https://sqs.test/1/q")
	res := p.SendBatch(context.Background(), []producer.Message{
		{ID: "a", Body: "a"}, {ID: "invalid", Body: "invalid"}, {ID: "kms", Body: "kms"}, {ID: "refused", Body: "refused call"}, {ID: "b", Body: "b"},
	})
	for _, r := range res {
		switch r.ID {
		case "a", "b":
			if r.Err != nil {
				t.Errorf("%s: %v", r.ID, r.Err)
			}
		case "invalid", "refused":
			if !errors.Is(r.Err, producer.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", r.ID, r.Err)
			}
		case "kms":
			if r.Err == nil || errors.Is(r.Err, producer.ErrInvalid) {
				t.Errorf("kms: %v, want an error that is not ErrInvalid", r.Err)
			}
		}
	}
	refused := 0
	for _, c := range s.calls {
		for _, e := range c.Entries {
			if attr(e) == "refused" {
				refused++
			}
		}
	}
	if refused != 2 {
		t.Fatalf("the message of the refused call was sent %d times, want 2 (in the batch, then alone)", refused)
	}
	// Checked before sending, too.
	for _, m := range []producer.Message{{Body: strings.Repeat("x", producer.MaxMessageBytes)}, {Body: "a\x00"}} {
		if _, err := p.Send(context.Background(), m); !errors.Is(err, producer.ErrInvalid) {
			t.Errorf("%.10q: %v, want ErrInvalid", m.Body, err)
		}
	}
	for _, err := range []error{
		&smithy.GenericAPIError{Code: "AccessDenied", Fault: smithy.FaultClient},
		&types.QueueDoesNotExist{},
	} {
		s := &stub{fn: func(int, *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) { return nil, err }}
		p, _ := producer.New(producer.Config{Client: s, QueueURL: "u", MaxAttempts: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
		r, got := p.Send(context.Background(), producer.Message{Body: "x"})
		if errors.Is(got, producer.ErrInvalid) || r.Attempts != 2 {
			t.Errorf("%v: %v after %d attempts, want retried and not ErrInvalid", err, got, r.Attempts)
		}
	}
}

// The queue's MaximumMessageSize is read once; a failed read sends nothing
// and is tried again by the next send; Config.MaxMessageBytes skips it.
func TestMaximumMessageSizeRead(t *testing.T) {
	s := &stub{attrsError: &smithy.GenericAPIError{Code: "AccessDenied", Fault: smithy.FaultClient}}
	p := newProducer(t, s, "https://sqs.test/1/q")
	res := p.SendBatch(context.Background(), []producer.Message{{ID: "a", Body: "a"}, {Body: "b"}})
	for _, r := range res {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "Config.MaxMessageBytes") || errors.Is(r.Err, producer.ErrInvalid) || r.ID == "" {
			t.Fatalf("%+v, want the read's error, saying what to set", r)
		}
	}
	if len(s.calls) != 0 {
		t.Fatalf("%d sends without the queue's MaximumMessageSize", len(s.calls))
	}
	s.mu.Lock()
	s.attrsError, s.maxSize = nil, "2048"
	s.mu.Unlock()
	if _, err := p.Send(context.Background(), producer.Message{Body: "a"}); err != nil {
		t.Fatal(err)
	}
	if n, err := p.MaxMessageBytes(context.Background()); n != 2048 || err != nil || s.attrCalls != 2 {
		t.Fatalf("MaxMessageBytes %d %v after %d reads, want 2048 after 2", n, err, s.attrCalls)
	}

	s = &stub{maxSize: "1024"}
	p, err := producer.New(producer.Config{Client: s, QueueURL: "u", MaxMessageBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(context.Background(), producer.Message{Body: strings.Repeat("x", 3000)}); err != nil || s.attrCalls != 0 {
		t.Fatalf("with MaxMessageBytes 4096: %v, %d reads of the queue", err, s.attrCalls)
	}
	for _, n := range []int{-1, 1023, producer.MaxMessageBytes + 1} {
		if _, err := producer.New(producer.Config{Client: s, QueueURL: "u", MaxMessageBytes: n}); err == nil {
			t.Errorf("MaxMessageBytes %d accepted", n)
		}
	}
}

// On the local stack: the producer reads a queue's MaximumMessageSize and
// refuses a message over it, counting sqsonce-id as SQS does.
func TestQueueLimitsOnTheLocalStack(t *testing.T) {
	client := testenv.SQS(t)
	url, _ := testenv.Queue(t, client, testenv.Prefix(t), testenv.QueueOptions{Attributes: map[string]string{"MaximumMessageSize": "1024"}})
	p, err := producer.New(producer.Config{Client: client, QueueURL: url})
	if err != nil {
		t.Fatal(err)
	}
	res := p.SendBatch(context.Background(), []producer.Message{{ID: "big", Body: strings.Repeat("x", 1010)}, {ID: "fits", Body: strings.Repeat("x", 900)}})
	if !errors.Is(res[0].Err, producer.ErrTooLarge) || res[0].Attempts != 0 {
		t.Fatalf("1010 bytes and sqsonce-id to a queue of MaximumMessageSize 1024: err %v after %d attempts, want ErrTooLarge unsent", res[0].Err, res[0].Attempts)
	}
	if res[1].Err != nil {
		t.Fatalf("900 bytes: %v", res[1].Err)
	}
	if n, err := p.MaxMessageBytes(context.Background()); n != 1024 || err != nil {
		t.Fatalf("MaxMessageBytes: %d %v, want 1024", n, err)
	}
}

// On a FIFO queue a message refused before sending blocks its group's
// later messages, as a failed send does, and a blocked message does not
// match ErrInvalid: it is not at fault.
func TestFIFORefusedBlocksItsGroup(t *testing.T) {
	s := &stub{}
	p := newProducer(t, s, "https://sqs.test/1/q.fifo")
	res := p.SendBatch(context.Background(), []producer.Message{
		{ID: "a0", Body: "a0", GroupID: "A"},
		{ID: "a1", Body: "a\x00", GroupID: "A"},
		{ID: "a2", Body: "a2", GroupID: "A"},
		{ID: "b0", Body: "b0", GroupID: "B"},
	})
	if res[0].Err != nil || res[3].Err != nil {
		t.Fatalf("a0: %v, b0: %v; want both sent", res[0].Err, res[3].Err)
	}
	if !errors.Is(res[1].Err, producer.ErrInvalid) {
		t.Fatalf("a1: %v, want ErrInvalid", res[1].Err)
	}
	if !errors.Is(res[2].Err, producer.ErrGroupBlocked) || errors.Is(res[2].Err, producer.ErrInvalid) || res[2].Attempts != 0 {
		t.Fatalf("a2: %v after %d attempts, want ErrGroupBlocked (not ErrInvalid), unsent", res[2].Err, res[2].Attempts)
	}
}
