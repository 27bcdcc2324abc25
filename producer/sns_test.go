package producer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/producer"
)

const (
	topic     = "arn:aws:sns:us-east-1:123456789012:orders"
	fifoTopic = "arn:aws:sns:us-east-1:123456789012:orders.fifo"
)

// snsStub answers PublishBatch through fn (and Publish through publish)
// and records every call. The topic reports maxSize as its
// MaximumMessageSize (no attribute when empty).
type snsStub struct {
	mu        sync.Mutex
	calls     []*sns.PublishBatchInput
	singles   []*sns.PublishInput
	fn        func(call int, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error)
	publish   func(call int, in *sns.PublishInput) (*sns.PublishOutput, error)
	maxSize   string
	attrCalls int
}

func (s *snsStub) GetTopicAttributes(_ context.Context, in *sns.GetTopicAttributesInput, _ ...func(*sns.Options)) (*sns.GetTopicAttributesOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attrCalls++
	out := &sns.GetTopicAttributesOutput{Attributes: map[string]string{"TopicArn": aws.ToString(in.TopicArn)}}
	if s.maxSize != "" {
		out.Attributes["MaximumMessageSize"] = s.maxSize
	}
	return out, nil
}

func (s *snsStub) PublishBatch(_ context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	s.mu.Lock()
	s.calls = append(s.calls, in)
	n := len(s.calls)
	s.mu.Unlock()
	if s.fn != nil {
		return s.fn(n, in)
	}
	return published(in, nil), nil
}

func (s *snsStub) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	s.mu.Lock()
	s.singles = append(s.singles, in)
	n := len(s.singles)
	s.mu.Unlock()
	if s.publish != nil {
		return s.publish(n, in)
	}
	return &sns.PublishOutput{MessageId: aws.String(fmt.Sprintf("sns-%d", n))}, nil
}

// published accepts every entry of in except those fail says to refuse.
func published(in *sns.PublishBatchInput, fail func(e snstypes.PublishBatchRequestEntry) *snstypes.BatchResultErrorEntry) *sns.PublishBatchOutput {
	out := &sns.PublishBatchOutput{}
	for _, e := range in.PublishBatchRequestEntries {
		if fail != nil {
			if f := fail(e); f != nil {
				f.Id = e.Id
				out.Failed = append(out.Failed, *f)
				continue
			}
		}
		out.Successful = append(out.Successful, snstypes.PublishBatchResultEntry{Id: e.Id, MessageId: aws.String("sns-" + aws.ToString(e.Message))})
	}
	return out
}

func snsID(attrs map[string]snstypes.MessageAttributeValue) string {
	return aws.ToString(attrs[producer.AttrID].StringValue)
}

func newPublisher(t *testing.T, client producer.SNSAPI, arn string) *producer.Publisher {
	t.Helper()
	p, err := producer.NewPublisher(producer.PublisherConfig{Client: client, TopicARN: arn, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every call stays within 10 entries and the topic's MaximumMessageSize
// (256 KiB when the topic reports none), counting attributes; every entry
// carries its sqsonce-id; made ids are UUIDs, given ones kept.
func TestPublishBatchSplitsWithinSNSLimits(t *testing.T) {
	t.Parallel()
	s := &snsStub{}
	p := newPublisher(t, s, topic)
	var msgs []producer.Publication
	for i := range 23 {
		msgs = append(msgs, producer.Publication{Body: fmt.Sprint(i)})
	}
	// Three of 100 KiB: two fit in one 256 KiB call, the third does not.
	for i := range 3 {
		msgs = append(msgs, producer.Publication{ID: fmt.Sprintf("big-%d", i), Body: strings.Repeat("x", 100<<10)})
	}
	res := p.PublishBatch(context.Background(), msgs)
	seen := map[string]bool{}
	for i, r := range res {
		if r.Err != nil || r.MessageID == "" || r.Attempts != 1 {
			t.Fatalf("message %d: %+v", i, r)
		}
		if seen[r.ID] {
			t.Fatalf("id %s given twice", r.ID)
		}
		seen[r.ID] = true
		if i >= 23 && r.ID != fmt.Sprintf("big-%d", i-23) {
			t.Fatalf("given id replaced: %q", r.ID)
		}
	}
	if len(s.calls) != 4 || len(s.singles) != 0 { // 10 + 10 + (3 small + 2 big) + 1 big
		t.Fatalf("%d PublishBatch and %d Publish calls, want 4 and 0", len(s.calls), len(s.singles))
	}
	for _, c := range s.calls {
		size := 0
		for _, e := range c.PublishBatchRequestEntries {
			size += len(aws.ToString(e.Message))
			for k, v := range e.MessageAttributes {
				size += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
			}
			if snsID(e.MessageAttributes) == "" {
				t.Fatal("entry without sqsonce-id")
			}
			if e.MessageGroupId != nil || e.MessageDeduplicationId != nil {
				t.Fatal("group or deduplication id sent to a standard topic without a GroupID")
			}
		}
		if len(c.PublishBatchRequestEntries) > producer.MaxBatchEntries || size > producer.DefaultTopicMessageBytes {
			t.Fatalf("call of %d entries, %d bytes", len(c.PublishBatchRequestEntries), size)
		}
	}
	if s.attrCalls != 1 {
		t.Fatalf("%d GetTopicAttributes calls, want 1", s.attrCalls)
	}
}

// Publish makes one Publish call, with sqsonce-id as a String attribute,
// the subject and the caller's attributes.
func TestPublishStampsTheID(t *testing.T) {
	t.Parallel()
	s := &snsStub{}
	p := newPublisher(t, s, topic)
	r, err := p.Publish(context.Background(), producer.Publication{
		ID: "order-o-1", Body: `{"order_id":"o-1"}`, Subject: "order",
		Attributes: map[string]snstypes.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}},
	})
	if err != nil || r.ID != "order-o-1" || r.MessageID != "sns-1" || r.Attempts != 1 {
		t.Fatalf("%+v, %v", r, err)
	}
	if len(s.singles) != 1 || len(s.calls) != 0 {
		t.Fatalf("%d Publish and %d PublishBatch calls, want 1 and 0", len(s.singles), len(s.calls))
	}
	in := s.singles[0]
	if aws.ToString(in.TopicArn) != topic || aws.ToString(in.Subject) != "order" || snsID(in.MessageAttributes) != "order-o-1" ||
		aws.ToString(in.MessageAttributes[producer.AttrID].DataType) != "String" || aws.ToString(in.MessageAttributes["tenant"].StringValue) != "acme" {
		t.Fatalf("published %+v", in)
	}
}

// A retried Publish keeps its sqsonce-id: that is what makes the
// consumer's dedupe apply the publication once.
func TestPublishRetryKeepsTheID(t *testing.T) {
	t.Parallel()
	s := &snsStub{publish: func(call int, in *sns.PublishInput) (*sns.PublishOutput, error) {
		if call == 1 {
			return nil, &smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}
		}
		return &sns.PublishOutput{MessageId: aws.String("sns-2")}, nil
	}}
	p := newPublisher(t, s, topic)
	r, err := p.Publish(context.Background(), producer.Publication{Body: "x"})
	if err != nil || r.Attempts != 2 {
		t.Fatalf("%+v %v, want published on the second attempt", r, err)
	}
	if a, b := snsID(s.singles[0].MessageAttributes), snsID(s.singles[1].MessageAttributes); a == "" || a != b || a != r.ID {
		t.Fatalf("sqsonce-id %q then %q (result %q), want one id on both attempts", a, b, r.ID)
	}
}

// On a FIFO topic the group is sent, MessageDeduplicationId is the
// sqsonce-id (or the DeduplicationID given; hashed when SNS would refuse
// it), and a message without a group is refused before publishing.
func TestPublishFIFOIDs(t *testing.T) {
	t.Parallel()
	s := &snsStub{}
	p := newPublisher(t, s, fifoTopic)
	long := strings.Repeat("é", 100)
	res := p.PublishBatch(context.Background(), []producer.Publication{
		{ID: "job-1", Body: "a", GroupID: "acct-1"},
		{ID: "job-2", Body: "b", GroupID: "acct-2", DeduplicationID: "copy-2"},
		{ID: long, Body: "c", GroupID: "acct-3"},
		{ID: "job-4", Body: "d"},
	})
	for i := range 3 {
		if res[i].Err != nil {
			t.Fatalf("message %d: %v", i, res[i].Err)
		}
	}
	if !errors.Is(res[3].Err, producer.ErrNoGroup) || !errors.Is(res[3].Err, producer.ErrInvalid) || res[3].Attempts != 0 {
		t.Fatalf("no group: %+v, want ErrNoGroup, never published", res[3])
	}
	got := map[string][2]string{}
	for _, c := range s.calls {
		for _, e := range c.PublishBatchRequestEntries {
			got[snsID(e.MessageAttributes)] = [2]string{aws.ToString(e.MessageGroupId), aws.ToString(e.MessageDeduplicationId)}
		}
	}
	if got["job-1"] != [2]string{"acct-1", "job-1"} || got["job-2"] != [2]string{"acct-2", "copy-2"} {
		t.Fatalf("group and deduplication ids %v", got)
	}
	if d := got[long][1]; len(d) != 64 || d == long {
		t.Fatalf("deduplication id of a 200-byte non-ASCII id: %q, want its hash", d)
	}
	// A standard topic sends a GroupID given (for SQS fair queues), never
	// a deduplication id.
	s2 := &snsStub{}
	if _, err := newPublisher(t, s2, topic).Publish(context.Background(), producer.Publication{Body: "x", GroupID: "tenant-1", DeduplicationID: "d"}); err != nil {
		t.Fatal(err)
	}
	if in := s2.singles[0]; aws.ToString(in.MessageGroupId) != "tenant-1" || in.MessageDeduplicationId != nil {
		t.Fatalf("standard topic: group %q dedup %v", aws.ToString(in.MessageGroupId), in.MessageDeduplicationId)
	}
}

// What SNS (or an SQS subscription with raw delivery) refuses is refused
// before publishing, matching ErrInvalid; the rest of the batch goes.
func TestPublishRefusesWhatSNSRefuses(t *testing.T) {
	t.Parallel()
	ten := map[string]snstypes.MessageAttributeValue{}
	for i := range 10 {
		ten[fmt.Sprintf("a%d", i)] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	for _, tc := range []struct {
		name    string
		m       producer.Publication
		tooBig  bool
		noGroup bool
	}{
		{name: "an empty body", m: producer.Publication{Body: ""}},
		{name: "invalid UTF-8", m: producer.Publication{Body: "a\xffb"}},
		{name: "NUL in the body", m: producer.Publication{Body: "a\x00b"}},
		{name: "a body over 256 KiB", m: producer.Publication{Body: strings.Repeat("x", producer.DefaultTopicMessageBytes)}, tooBig: true},
		{name: "attributes that take the body over 256 KiB", m: producer.Publication{Body: strings.Repeat("x", producer.DefaultTopicMessageBytes-60),
			Attributes: map[string]snstypes.MessageAttributeValue{"pad": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("p", 20))}}}, tooBig: true},
		{name: "ten attributes plus sqsonce-id", m: producer.Publication{Body: "x", Attributes: ten}, tooBig: true},
		{name: "an attribute without a value", m: producer.Publication{Body: "x", Attributes: map[string]snstypes.MessageAttributeValue{"a": {DataType: aws.String("String")}}}},
		{name: "an attribute without a type", m: producer.Publication{Body: "x", Attributes: map[string]snstypes.MessageAttributeValue{"a": {StringValue: aws.String("v")}}}},
		{name: "a subject of 100 characters", m: producer.Publication{Body: "x", Subject: strings.Repeat("s", 100)}},
		{name: "a line break in the subject", m: producer.Publication{Body: "x", Subject: "a\nb"}},
		{name: "a group id of 129 characters", m: producer.Publication{Body: "x", GroupID: strings.Repeat("g", 129)}},
		{name: "a space in the group id", m: producer.Publication{Body: "x", GroupID: "acct 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &snsStub{}
			p := newPublisher(t, s, topic)
			fine := producer.Publication{Body: "fine \t\n\r\U0010FFFF", Subject: strings.Repeat("é", 99), Attributes: map[string]snstypes.MessageAttributeValue{
				"b": {DataType: aws.String("Binary"), BinaryValue: []byte{0}},
			}}
			res := p.PublishBatch(context.Background(), []producer.Publication{tc.m, fine})
			if !errors.Is(res[0].Err, producer.ErrInvalid) || res[0].Attempts != 0 {
				t.Fatalf("%+v, want ErrInvalid, never published", res[0])
			}
			if tc.tooBig != errors.Is(res[0].Err, producer.ErrTooLarge) {
				t.Fatalf("%v: ErrTooLarge %v, want %v", res[0].Err, !tc.tooBig, tc.tooBig)
			}
			if res[1].Err != nil {
				t.Fatalf("the fine message: %v", res[1].Err)
			}
			if len(s.calls) != 1 || len(s.calls[0].PublishBatchRequestEntries) != 1 {
				t.Fatalf("%d calls, want one with the fine message only", len(s.calls))
			}
		})
	}
}

// A topic whose MaximumMessageSize is 1 MiB takes a 600 KiB message, and
// batches up to that size; one of 2 KiB takes nothing larger.
func TestPublishReadsTheTopicsMaximumMessageSize(t *testing.T) {
	t.Parallel()
	s := &snsStub{maxSize: "1048576"}
	p := newPublisher(t, s, topic)
	big := strings.Repeat("x", 600<<10)
	res := p.PublishBatch(context.Background(), []producer.Publication{{Body: big}, {Body: big}})
	if res[0].Err != nil || res[1].Err != nil || len(s.calls) != 2 {
		t.Fatalf("two 600 KiB messages to a 1 MiB topic: %v, %v in %d calls, want both, one a call", res[0].Err, res[1].Err, len(s.calls))
	}
	small := &snsStub{maxSize: "2048"}
	if _, err := newPublisher(t, small, topic).Publish(context.Background(), producer.Publication{Body: strings.Repeat("x", 2100)}); !errors.Is(err, producer.ErrTooLarge) {
		t.Fatalf("2100 bytes to a topic of 2048: %v, want ErrTooLarge", err)
	}
	if len(small.singles) != 0 {
		t.Fatal("published a message over the topic's MaximumMessageSize")
	}
	fixed := &snsStub{}
	pf, err := producer.NewPublisher(producer.PublisherConfig{Client: fixed, TopicARN: topic, MaxMessageBytes: producer.MaxTopicMessageBytes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pf.Publish(context.Background(), producer.Publication{Body: big}); err != nil || fixed.attrCalls != 0 {
		t.Fatalf("with MaxMessageBytes set: %v after %d GetTopicAttributes calls, want published without any", err, fixed.attrCalls)
	}
}

// Entries SNS fails not as the sender's fault are retried alone, with
// their sqsonce-id; a sender fault about the message is ErrInvalid and
// not retried; one about access is neither retried nor ErrInvalid; a
// whole call refused for a message is split to find which.
func TestPublishBatchRetriesAndClassifies(t *testing.T) {
	t.Parallel()
	s := &snsStub{fn: func(call int, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		if call == 1 {
			return nil, errors.New("connection reset")
		}
		if call == 2 {
			return published(in, func(e snstypes.PublishBatchRequestEntry) *snstypes.BatchResultErrorEntry {
				switch aws.ToString(e.Message) {
				case "throttled":
					return &snstypes.BatchResultErrorEntry{Code: aws.String("Throttled"), SenderFault: false}
				case "bad":
					return &snstypes.BatchResultErrorEntry{Code: aws.String("InvalidParameter"), Message: aws.String("bad"), SenderFault: true}
				case "kms":
					return &snstypes.BatchResultErrorEntry{Code: aws.String("KMSAccessDenied"), SenderFault: true}
				}
				return nil
			}), nil
		}
		return published(in, nil), nil
	}}
	p := newPublisher(t, s, topic)
	res := p.PublishBatch(context.Background(), []producer.Publication{{Body: "a"}, {Body: "throttled"}, {Body: "bad"}, {Body: "kms"}})
	if res[0].Err != nil || res[0].Attempts != 2 {
		t.Fatalf("a: %+v", res[0])
	}
	if res[1].Err != nil || res[1].Attempts != 3 {
		t.Fatalf("throttled: %+v, want published on the third attempt", res[1])
	}
	var ee *producer.EntryError
	if !errors.As(res[2].Err, &ee) || !errors.Is(res[2].Err, producer.ErrInvalid) || res[2].Attempts != 2 || !strings.Contains(res[2].Err.Error(), "SNS refused") {
		t.Fatalf("bad: %+v, want an SNS EntryError matching ErrInvalid after 2 attempts", res[2])
	}
	if res[3].Err == nil || errors.Is(res[3].Err, producer.ErrInvalid) || res[3].Attempts != 2 {
		t.Fatalf("kms: %+v, want a failure that is not ErrInvalid, not retried", res[3])
	}
	if got := s.calls[2].PublishBatchRequestEntries; len(got) != 1 || snsID(got[0].MessageAttributes) != res[1].ID {
		t.Fatalf("third call carried %d entries, want only the throttled one with its id", len(got))
	}

	// The whole call refused (InvalidParameter): each message alone.
	s2 := &snsStub{fn: func(_ int, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		for _, e := range in.PublishBatchRequestEntries {
			if aws.ToString(e.Message) == "poison" {
				return nil, &smithy.GenericAPIError{Code: "InvalidParameter", Message: "Invalid parameter: Message"}
			}
		}
		return published(in, nil), nil
	}}
	res = newPublisher(t, s2, topic).PublishBatch(context.Background(), []producer.Publication{{Body: "a"}, {Body: "poison"}, {Body: "c"}})
	if res[0].Err != nil || res[2].Err != nil || !errors.Is(res[1].Err, producer.ErrInvalid) {
		t.Fatalf("after a refused call: %v / %v / %v, want the poison alone refused", res[0].Err, res[1].Err, res[2].Err)
	}
}

// On a FIFO topic a group whose message failed publishes none of its
// later messages; other groups go on.
func TestPublishFIFOGroupBlockedAfterFailure(t *testing.T) {
	t.Parallel()
	s := &snsStub{fn: func(_ int, in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
		return published(in, func(e snstypes.PublishBatchRequestEntry) *snstypes.BatchResultErrorEntry {
			if aws.ToString(e.Message) == "a1" {
				return &snstypes.BatchResultErrorEntry{Code: aws.String("InvalidParameter"), SenderFault: true}
			}
			return nil
		}), nil
	}}
	p := newPublisher(t, s, fifoTopic)
	var msgs []producer.Publication
	for i := range 4 {
		msgs = append(msgs, producer.Publication{Body: fmt.Sprintf("a%d", i), GroupID: "A"}, producer.Publication{Body: fmt.Sprintf("b%d", i), GroupID: "B"})
	}
	res := p.PublishBatch(context.Background(), msgs)
	for i, m := range msgs {
		switch {
		case m.GroupID == "B" || m.Body == "a0":
			if res[i].Err != nil {
				t.Fatalf("%s: %v", m.Body, res[i].Err)
			}
		case m.Body == "a1":
			if !errors.Is(res[i].Err, producer.ErrInvalid) {
				t.Fatalf("a1: %v", res[i].Err)
			}
		default:
			if !errors.Is(res[i].Err, producer.ErrGroupBlocked) || errors.Is(res[i].Err, producer.ErrInvalid) {
				t.Fatalf("%s: %v, want ErrGroupBlocked (not ErrInvalid)", m.Body, res[i].Err)
			}
		}
	}
	for _, c := range s.calls {
		groups := map[string]bool{}
		for _, e := range c.PublishBatchRequestEntries {
			g := aws.ToString(e.MessageGroupId)
			if groups[g] {
				t.Fatalf("two messages of group %s in one call", g)
			}
			groups[g] = true
			if b := aws.ToString(e.Message); b == "a2" || b == "a3" {
				t.Fatalf("published %s after a1 failed", b)
			}
		}
	}
}

// The trace context of ctx is added while the message has room; its own
// attributes win.
func TestPublishAddsTraceContext(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	nine := map[string]snstypes.MessageAttributeValue{}
	for i := range 9 {
		nine[fmt.Sprintf("a%d", i)] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	s := &snsStub{}
	p := newPublisher(t, s, topic)
	res := p.PublishBatch(ctx, []producer.Publication{{Body: "room"}, {Body: "full", Attributes: nine}})
	if res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("%v / %v", res[0].Err, res[1].Err)
	}
	for _, e := range s.calls[0].PublishBatchRequestEntries {
		_, traced := e.MessageAttributes["traceparent"]
		if want := aws.ToString(e.Message) == "room"; traced != want {
			t.Fatalf("%s: traceparent %v, want %v", aws.ToString(e.Message), traced, want)
		}
		if len(e.MessageAttributes) > producer.MaxMessageAttributes {
			t.Fatalf("%s: %d attributes", aws.ToString(e.Message), len(e.MessageAttributes))
		}
	}
}

func TestNewPublisherRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []producer.PublisherConfig{
		{TopicARN: topic},
		{Client: &snsStub{}},
		{Client: &snsStub{}, TopicARN: "orders"},
		{Client: &snsStub{}, TopicARN: "arn:aws:sqs:us-east-1:123456789012:orders"},
		{Client: &snsStub{}, TopicARN: topic, MaxAttempts: -1},
		{Client: &snsStub{}, TopicARN: topic, MaxMessageBytes: producer.MaxTopicMessageBytes + 1},
	} {
		if _, err := producer.NewPublisher(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
