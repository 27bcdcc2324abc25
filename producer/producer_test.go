package producer_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/producer"
)

// stub answers SendMessageBatch through fn and records every call. Its
// queue's MaximumMessageSize is maxSize (1 MiB when empty).
type stub struct {
	mu         sync.Mutex
	calls      []*sqs.SendMessageBatchInput
	fn         func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
	maxSize    string
	attrCalls  int
	attrsError error
}

func (s *stub) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attrCalls++
	if s.attrsError != nil {
		return nil, s.attrsError
	}
	out := &sqs.GetQueueAttributesOutput{Attributes: map[string]string{}}
	for _, a := range in.AttributeNames {
		if a == types.QueueAttributeNameMaximumMessageSize {
			out.Attributes[string(a)] = cmp.Or(s.maxSize, "1048576")
		}
	}
	return out, nil
}

func (s *stub) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	s.calls = append(s.calls, in)
	n := len(s.calls)
	s.mu.Unlock()
	if s.fn != nil {
		return s.fn(n, in)
	}
	return ok(in, nil), nil
}

// ok accepts every entry of in except those fail says to refuse.
func ok(in *sqs.SendMessageBatchInput, fail func(e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry) *sqs.SendMessageBatchOutput {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if fail != nil {
			if f := fail(e); f != nil {
				f.Id = e.Id
				out.Failed = append(out.Failed, *f)
				continue
			}
		}
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + aws.ToString(e.MessageBody))})
	}
	return out
}

func attr(e types.SendMessageBatchRequestEntry) string {
	return aws.ToString(e.MessageAttributes[producer.AttrID].StringValue)
}

func newProducer(t *testing.T, client producer.SQSAPI, url string) *producer.Producer {
	t.Helper()
	p, err := producer.New(producer.Config{Client: client, QueueURL: url, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBatchesWithinLimits(t *testing.T) {
	s := &stub{}
	p := newProducer(t, s, "https://sqs.test/1/q")
	var msgs []producer.Message
	for i := range 23 {
		msgs = append(msgs, producer.Message{Body: fmt.Sprint(i)})
	}
	// Three bodies of 400 KiB: two fit in one 1 MiB call, the third does not.
	for i := range 3 {
		msgs = append(msgs, producer.Message{ID: fmt.Sprintf("big-%d", i), Body: strings.Repeat("x", 400<<10)})
	}
	res := p.SendBatch(context.Background(), msgs)
	seen := map[string]bool{}
	for i, r := range res {
		if r.Err != nil || r.MessageID == "" || r.Attempts != 1 {
			t.Fatalf("message %d: %+v", i, r)
		}
		if seen[r.ID] {
			t.Fatalf("id %s given twice", r.ID)
		}
		seen[r.ID] = true
		if i < 23 {
			if u, err := uuid.Parse(r.ID); err != nil || u.Version() != 7 {
				t.Fatalf("made id %q is not a UUIDv7", r.ID)
			}
		} else if r.ID != fmt.Sprintf("big-%d", i-23) {
			t.Fatalf("given id replaced: %q", r.ID)
		}
	}
	if len(s.calls) != 4 { // 10 + 10 + (3 small + 2 big: under 1 MiB) + 1 big
		t.Fatalf("%d calls, want 4", len(s.calls))
	}
	for _, c := range s.calls {
		size := 0
		for _, e := range c.Entries {
			size += len(aws.ToString(e.MessageBody))
			if attr(e) == "" {
				t.Fatal("entry without sqsonce-id")
			}
		}
		if len(c.Entries) > 10 || size > producer.MaxMessageBytes {
			t.Fatalf("call of %d entries, %d bytes", len(c.Entries), size)
		}
	}
}

func TestRefusedBeforeSending(t *testing.T) {
	s := &stub{}
	p := newProducer(t, s, "https://sqs.test/1/q")
	attrs := map[string]types.MessageAttributeValue{}
	for i := range 10 {
		attrs[fmt.Sprintf("a%d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	res := p.SendBatch(context.Background(), []producer.Message{
		{Body: strings.Repeat("x", producer.MaxMessageBytes)},
		{Body: "ten attributes plus sqsonce-id", Attributes: attrs},
		{Body: "fine"},
	})
	for i := range 2 {
		if !errors.Is(res[i].Err, producer.ErrTooLarge) || res[i].Attempts != 0 {
			t.Fatalf("message %d: %+v, want ErrTooLarge and no attempt", i, res[i])
		}
	}
	if res[2].Err != nil || len(s.calls) != 1 || len(s.calls[0].Entries) != 1 {
		t.Fatalf("the good message: %+v, calls %d", res[2], len(s.calls))
	}
}

func TestRetriesFailedEntriesOnly(t *testing.T) {
	s := &stub{fn: func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		switch call {
		case 1:
			return nil, errors.New("connection reset")
		case 2:
			return ok(in, func(e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
				switch aws.ToString(e.MessageBody) {
				case "throttled":
					return &types.BatchResultErrorEntry{Code: aws.String("InternalError"), SenderFault: false}
				case "bad":
					return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), SenderFault: true}
				}
				return nil
			}), nil
		}
		return ok(in, nil), nil
	}}
	p := newProducer(t, s, "https://sqs.test/1/q")
	res := p.SendBatch(context.Background(), []producer.Message{{Body: "a"}, {Body: "throttled"}, {Body: "bad"}})
	if res[0].Err != nil || res[0].Attempts != 2 {
		t.Fatalf("a: %+v", res[0])
	}
	if res[1].Err != nil || res[1].Attempts != 3 {
		t.Fatalf("throttled: %+v, want sent on the third attempt", res[1])
	}
	var ee *producer.EntryError
	if !errors.As(res[2].Err, &ee) || !ee.SenderFault || res[2].Attempts != 2 {
		t.Fatalf("bad: %+v, want a sender-fault EntryError after 2 attempts", res[2])
	}
	if got := len(s.calls[2].Entries); got != 1 {
		t.Fatalf("third call carried %d entries, want only the throttled one", got)
	}
	if attr(s.calls[2].Entries[0]) != res[1].ID {
		t.Fatal("a retry must keep the message's sqsonce-id")
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	s := &stub{fn: func(int, *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return nil, errors.New("down")
	}}
	p, _ := producer.New(producer.Config{Client: s, QueueURL: "u", MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	r, err := p.Send(context.Background(), producer.Message{Body: "x"})
	if err == nil || r.Attempts != 3 || len(s.calls) != 3 {
		t.Fatalf("%+v %v, calls %d", r, err, len(s.calls))
	}
}

func TestFIFOGroupBlockedAfterFailure(t *testing.T) {
	s := &stub{fn: func(_ int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return ok(in, func(e types.SendMessageBatchRequestEntry) *types.BatchResultErrorEntry {
			if aws.ToString(e.MessageBody) == "a2" {
				return &types.BatchResultErrorEntry{Code: aws.String("InvalidMessageContents"), SenderFault: true}
			}
			return nil
		}), nil
	}}
	p := newProducer(t, s, "https://sqs.test/1/q.fifo")
	var msgs []producer.Message
	for i := range 15 {
		msgs = append(msgs, producer.Message{ID: fmt.Sprintf("a%d", i), Body: fmt.Sprintf("a%d", i), GroupID: "A"})
		msgs = append(msgs, producer.Message{ID: fmt.Sprintf("b%d", i), Body: fmt.Sprintf("b%d", i), GroupID: "B"})
	}
	msgs = append(msgs, producer.Message{Body: "no group"})
	res := p.SendBatch(context.Background(), msgs)
	for i, m := range msgs[:30] {
		r := res[i]
		switch {
		case m.GroupID == "B" && r.Err != nil:
			t.Fatalf("%s: %v", m.Body, r.Err)
		case m.Body == "a0" || m.Body == "a1":
			if r.Err != nil {
				t.Fatalf("%s: %v", m.Body, r.Err)
			}
		case m.GroupID == "A" && m.Body != "a2":
			if !errors.Is(r.Err, producer.ErrGroupBlocked) {
				t.Fatalf("%s: %v, want ErrGroupBlocked", m.Body, r.Err)
			}
		}
	}
	if !errors.Is(res[30].Err, producer.ErrNoGroup) {
		t.Fatalf("no group: %v", res[30].Err)
	}
	var sent []string
	for _, c := range s.calls {
		for _, e := range c.Entries {
			if aws.ToString(e.MessageGroupId) == "" || aws.ToString(e.MessageDeduplicationId) != attr(e) {
				t.Fatalf("FIFO entry %s: group %q dedup %q", aws.ToString(e.MessageBody), aws.ToString(e.MessageGroupId), aws.ToString(e.MessageDeduplicationId))
			}
			sent = append(sent, aws.ToString(e.MessageBody))
		}
	}
	for _, b := range sent {
		var n int
		if _, err := fmt.Sscanf(b, "a%d", &n); err == nil && n > 2 {
			t.Fatalf("sent %s after a2 failed: %v", b, sent)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []producer.Config{
		{QueueURL: "u"},
		{Client: &stub{}},
		{Client: &stub{}, QueueURL: "u", MaxAttempts: -1},
	} {
		if _, err := producer.New(cfg); err == nil {
			t.Fatalf("%+v accepted", cfg)
		}
	}
}

// On fauxqs: sent messages carry their sqsonce-id, FIFO keeps each group's
// order, and a re-send of the same id on FIFO is dropped by SQS.
func TestOnTheLocalStack(t *testing.T) {
	client := testenv.SQS(t)
	ctx := context.Background()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			url, _ := testenv.Queue(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: fifo})
			p, err := producer.New(producer.Config{Client: client, QueueURL: url})
			if err != nil {
				t.Fatal(err)
			}
			var msgs []producer.Message
			for i := range 24 {
				msgs = append(msgs, producer.Message{ID: fmt.Sprintf("job-%02d", i), Body: fmt.Sprintf(`{"n":%d}`, i), GroupID: fmt.Sprintf("g%d", i%3)})
			}
			for i, r := range p.SendBatch(ctx, msgs) {
				if r.Err != nil || r.ID != msgs[i].ID {
					t.Fatalf("%d: %+v", i, r)
				}
			}
			if fifo { // the same ids again: SQS's deduplication drops them
				for i, r := range p.SendBatch(ctx, msgs[:5]) {
					if r.Err != nil {
						t.Fatalf("re-send %d: %v", i, r.Err)
					}
				}
			}
			got := testenv.Receive(t, client, url, 24, true)
			last := map[string]string{}
			for _, m := range got {
				id := aws.ToString(m.MessageAttributes[producer.AttrID].StringValue)
				if !strings.HasPrefix(id, "job-") {
					t.Fatalf("received without sqsonce-id: %v", m.MessageAttributes)
				}
				if fifo {
					g := m.Attributes["MessageGroupId"]
					if id < last[g] {
						t.Fatalf("group %s out of order: %s after %s", g, id, last[g])
					}
					last[g] = id
				}
			}
			if visible, inFlight := testenv.Count(t, client, url); visible+inFlight != 0 {
				t.Fatalf("%d messages left: a FIFO re-send was enqueued twice", visible+inFlight)
			}
		})
	}
}

func TestCreateQueue(t *testing.T) {
	client := testenv.SQS(t)
	ctx := context.Background()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			name := testenv.Name("pq")
			cfg := producer.QueueConfig{Name: name, FIFO: fifo, MaxReceiveCount: 7}
			q, err := producer.CreateQueue(ctx, client, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, u := range []string{q.URL, q.DeadLetterURL} {
					_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
				}
			})
			if fifo != strings.HasSuffix(q.URL, ".fifo") || fifo != strings.HasSuffix(q.DeadLetterURL, ".fifo") || !strings.Contains(q.DeadLetterURL, name+"-dlq") {
				t.Fatalf("queues %+v", q)
			}
			cfg.VisibilityTimeout = 2 * time.Minute
			q2, err := producer.CreateQueue(ctx, client, cfg)
			if err != nil || q2 != q {
				t.Fatalf("second call: %+v %v, want the same queues", q2, err)
			}
			a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
			if err != nil {
				t.Fatal(err)
			}
			rp := a.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
			if !strings.Contains(rp, q.DeadLetterARN) || !strings.Contains(strings.ReplaceAll(rp, `"`, ""), "maxReceiveCount:7") {
				t.Fatalf("RedrivePolicy %s", rp)
			}
			if v := a.Attributes[string(types.QueueAttributeNameVisibilityTimeout)]; v != "120" {
				t.Fatalf("visibility %s after the second call, want 120", v)
			}
			d, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.DeadLetterURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMessageRetentionPeriod}})
			if err != nil || d.Attributes[string(types.QueueAttributeNameMessageRetentionPeriod)] != "1209600" {
				t.Fatalf("DLQ retention %v %v, want 14 days", d.Attributes, err)
			}
		})
	}
	if _, err := producer.CreateQueue(ctx, client, producer.QueueConfig{}); err == nil {
		t.Fatal("empty name accepted")
	}
}

// A message's own sqsonce-id attribute is sent only when it is the
// message's id as sent: any other is replaced, and the caller's map is
// never changed.
func TestOwnIDAttribute(t *testing.T) {
	s := &stub{}
	p := newProducer(t, s, "https://sqs.example/1/q")
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	same := map[string]types.MessageAttributeValue{producer.AttrID: str("a"), "k": str("v")}
	other := map[string]types.MessageAttributeValue{producer.AttrID: str("not-b"), "k": str("v")}
	number := map[string]types.MessageAttributeValue{producer.AttrID: {DataType: aws.String("Number"), StringValue: aws.String("1")}}
	for _, r := range p.SendBatch(context.Background(), []producer.Message{
		{ID: "a", Body: "x", Attributes: same}, {ID: "b", Body: "y", Attributes: other}, {ID: "1", Body: "z", Attributes: number},
	}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	es := s.calls[0].Entries
	for i, want := range []string{"a", "b", "1"} {
		got := es[i].MessageAttributes[producer.AttrID]
		if aws.ToString(got.StringValue) != want || aws.ToString(got.DataType) != "String" {
			t.Errorf("entry %d: sqsonce-id %s %q, want String %q", i, aws.ToString(got.DataType), aws.ToString(got.StringValue), want)
		}
		if i < 2 && aws.ToString(es[i].MessageAttributes["k"].StringValue) != "v" {
			t.Errorf("entry %d: attribute k lost", i)
		}
	}
	if v := aws.ToString(other[producer.AttrID].StringValue); v != "not-b" {
		t.Errorf("the caller's map was changed: sqsonce-id %q", v)
	}
	if v := aws.ToString(number[producer.AttrID].DataType); v != "Number" {
		t.Errorf("the caller's map was changed: sqsonce-id of type %q", v)
	}
}
