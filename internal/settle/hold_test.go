package settle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/producer"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// TestHoldRule is the hold rule of both runtimes: a copy's first receive
// holds it by its visibility (up to SQS's 12 hours from the receive, less
// a minute), any later receive, or a first one the queue's
// maxReceiveCount allows no other after, re-sends it delayed by at most
// 15 minutes; hop caps both.
func TestHoldRule(t *testing.T) {
	recv := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := recv.Add(2 * time.Second)
	for _, c := range []struct {
		name           string
		left           time.Duration
		count, maxRecv int
		hop            time.Duration
		want           settle.HoldAction
	}{
		{name: "first receive, 3h left", left: 3 * time.Hour, count: 1, maxRecv: 10, want: settle.HoldAction{Seconds: 3 * 3600}},
		{name: "first receive, 500ms left", left: 500 * time.Millisecond, count: 1, want: settle.HoldAction{Seconds: 1}},
		{name: "first receive, 20h left: 12h less a minute from the receive", left: 20 * time.Hour, count: 1,
			want: settle.HoldAction{Seconds: int32((12*time.Hour - time.Minute - 2*time.Second) / time.Second)}},
		{name: "second receive: re-sent", left: 3 * time.Hour, count: 2, maxRecv: 10, want: settle.HoldAction{Resend: true, Seconds: 900}},
		{name: "second receive, 100s left", left: 100*time.Second + time.Millisecond, count: 2, want: settle.HoldAction{Resend: true, Seconds: 101}},
		{name: "maxReceiveCount 1: re-sent at once", left: 3 * time.Hour, count: 1, maxRecv: 1, want: settle.HoldAction{Resend: true, Seconds: 900}},
		{name: "hop 10s, first receive", left: 40 * time.Second, count: 1, hop: 10 * time.Second, want: settle.HoldAction{Seconds: 10}},
		{name: "hop 10s, second receive", left: 40 * time.Second, count: 2, hop: 10 * time.Second, want: settle.HoldAction{Resend: true, Seconds: 10}},
	} {
		got := settle.Hold(now.Add(c.left), c.count, c.maxRecv, c.hop, recv, now)
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestResendInput: a re-sent copy carries the body and attributes as
// received, the mark one hop further naming the first copy, and an
// sqsonce-id (the first copy's MessageId) when it had none.
func TestResendInput(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sent := time.UnixMilli(1767225600000)
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	in, err := settle.ResendInput(settle.Copy{
		QueueURL: "q", Body: "pointer", MessageID: "m1", SentAt: sent, Delay: 900,
		Attributes: map[string]types.MessageAttributeValue{hold.Attr: str(hold.Mark{NotBefore: at}.Value()), "x": str("y")},
	})
	if err != nil {
		t.Fatal(err)
	}
	mark, err := hold.Parse(aws.ToString(in.MessageAttributes[hold.Attr].StringValue))
	if err != nil || !mark.NotBefore.Equal(at) || mark.Hop != 1 || mark.MessageID != "m1" || !mark.SentAt.Equal(sent) {
		t.Errorf("mark %+v (%v)", mark, err)
	}
	if aws.ToString(in.MessageBody) != "pointer" || in.DelaySeconds != 900 || aws.ToString(in.QueueUrl) != "q" ||
		aws.ToString(in.MessageAttributes["x"].StringValue) != "y" || aws.ToString(in.MessageAttributes[consumer.AttrID].StringValue) != "m1" {
		t.Errorf("input %+v", in)
	}
	// The next hop keeps the first copy's id and time.
	again, err := settle.ResendInput(settle.Copy{QueueURL: "q", Body: "pointer", MessageID: "m2", SentAt: sent.Add(time.Hour), Delay: 5, Attributes: in.MessageAttributes})
	if err != nil {
		t.Fatal(err)
	}
	mark, _ = hold.Parse(aws.ToString(again.MessageAttributes[hold.Attr].StringValue))
	if mark.Hop != 2 || mark.MessageID != "m1" || !mark.SentAt.Equal(sent) || aws.ToString(again.MessageAttributes[consumer.AttrID].StringValue) != "m1" {
		t.Errorf("second hop: mark %+v, sqsonce-id %q", mark, aws.ToString(again.MessageAttributes[consumer.AttrID].StringValue))
	}
	full := map[string]types.MessageAttributeValue{hold.Attr: str(hold.Mark{NotBefore: at}.Value())}
	for i := range 9 {
		full[fmt.Sprint("a", i)] = str("v")
	}
	if _, err := settle.ResendInput(settle.Copy{QueueURL: "q", Body: "b", MessageID: "m1", Attributes: full}); !errors.Is(err, settle.ErrNoRoom) {
		t.Errorf("ten attributes and no sqsonce-id: %v, want ErrNoRoom", err)
	}
}

// receiveLog wraps the fake and records every receive's highest
// ApproximateReceiveCount per copy (MessageId).
type receiveLog struct {
	*sqsfake.Fake
	mu     sync.Mutex
	counts map[string]int
}

func (l *receiveLog) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := l.Fake.ReceiveMessage(ctx, in, o...)
	if err == nil {
		l.mu.Lock()
		for _, m := range out.Messages {
			n := 0
			fmt.Sscan(m.Attributes["ApproximateReceiveCount"], &n)
			l.counts[aws.ToString(m.MessageId)] = max(l.counts[aws.ToString(m.MessageId)], n)
		}
		l.mu.Unlock()
	}
	return out, err
}

// run is one handler run of a delayed message.
type run struct {
	at                  time.Time
	id, body, sqsonceID string
	notBefore           string
	sentAt              time.Time
	receiveCount        int
	attempt             int
}

// TestDelayedAcrossRestarts: messages sent not before times from 10
// minutes to 30 hours ahead run once each, at their time (not earlier,
// within seconds after), with the body, attributes and id they were sent
// with, while the worker (a consumer, or a Lambda adapter behind a
// simulated event source mapping) is stopped and started again five
// times. All the state is in SQS. The queue's maxReceiveCount is 2: a
// copy is received at most twice (held once, then run or re-sent), and
// nothing reaches the dead-letter queue. On the fake, in a synctest
// bubble: 31 hours pass in a moment.
func TestDelayedAcrossRestarts(t *testing.T) {
	for _, runtime := range []string{"consumer", "lambda"} {
		t.Run(runtime, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { delayedAcrossRestarts(t, runtime) })
		})
	}
}

func delayedAcrossRestarts(t *testing.T, runtime string) {
	f := sqsfake.New()
	dlq := f.AddQueue("delayed-dlq", nil)
	url := f.AddQueue("delayed", map[string]string{
		"VisibilityTimeout":      "60",
		"MessageRetentionPeriod": "345600", // 4 days
		"RedrivePolicy":          `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:delayed-dlq","maxReceiveCount":"2"}`,
	})
	const arn = "arn:aws:sqs:us-east-1:123456789012:delayed"
	rec := &receiveLog{Fake: f, counts: map[string]int{}}

	start := time.Now()
	delays := map[string]time.Duration{
		"now": 0,
		"10m": 10 * time.Minute,
		"3h":  3*time.Hour + 7*time.Second,
		"13h": 13*time.Hour + 250*time.Millisecond,
		"30h": 30*time.Hour + 17*time.Second,
	}
	p, err := producer.New(producer.Config{Client: f, QueueURL: url})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []producer.Message
	for name, d := range delays {
		m := producer.Message{ID: "id-" + name, Body: "body " + name, Attributes: map[string]types.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("credit")},
		}}
		if d > 0 {
			m.NotBefore = start.Add(d)
		}
		msgs = append(msgs, m)
	}
	firstID := map[string]string{}
	for i, r := range p.SendBatch(context.Background(), msgs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		firstID[msgs[i].Body] = r.MessageID
	}

	var mu sync.Mutex
	runs := map[string][]run{}
	handler := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		runs[m.Body] = append(runs[m.Body], run{
			at: time.Now(), id: m.ID, body: m.Body, sqsonceID: m.Attribute(consumer.AttrID),
			notBefore: m.Attribute(consumer.AttrNotBefore), sentAt: m.SentAt,
			receiveCount: m.ReceiveCount, attempt: m.Attempt(),
		})
		return nil
	})

	// A worker runs from each start to the next stop; between a stop and
	// the next start none runs for 5 minutes (no message is due then).
	starts := []time.Duration{0, time.Hour, 6 * time.Hour, 12*time.Hour + 30*time.Minute, 20 * time.Hour, 29 * time.Hour}
	end := 31 * time.Hour
	for i, s := range starts {
		time.Sleep(time.Until(start.Add(s)))
		stopAt := end
		if i+1 < len(starts) {
			stopAt = starts[i+1] - 5*time.Minute
		}
		stop := startWorker(t, runtime, rec, url, arn, handler)
		time.Sleep(time.Until(start.Add(stopAt)))
		stop()
	}

	mu.Lock()
	defer mu.Unlock()
	for name, d := range delays {
		body := "body " + name
		got := runs[body]
		if len(got) != 1 {
			t.Errorf("%s ran %d times, want once", name, len(got))
			continue
		}
		r := got[0]
		due := start.Add(d)
		if d > 0 && (r.at.Before(due) || r.at.After(due.Add(3*time.Second))) {
			t.Errorf("%s ran at +%s, want at its time +%s or within 3s after", name, r.at.Sub(start), d)
		}
		if r.id != firstID[body] || r.sqsonceID != "id-"+name || !r.sentAt.Equal(start.Truncate(time.Millisecond)) || r.attempt != 1 {
			t.Errorf("%s: the handler saw id %q (sent as %q), sqsonce-id %q, sent at %s (sent at %s), attempt %d",
				name, r.id, firstID[body], r.sqsonceID, r.sentAt, start, r.attempt)
		}
		if d > 0 && r.notBefore != (hold.Mark{NotBefore: due}).Value() {
			t.Errorf("%s: the handler saw %s %q, want the value sent, %q", name, consumer.AttrNotBefore, r.notBefore, (hold.Mark{NotBefore: due}).Value())
		}
	}
	// Several hops: the 30-hour message was re-sent twice (each copy's
	// visibility held about 12 hours once, then re-sent), and every copy
	// of every message was received at most twice.
	hops := map[string]int{}
	for _, s := range f.Sent(url) {
		if v := aws.ToString(s.Attributes[hold.Attr].StringValue); strings.Contains(v, ";hop=") {
			hops[s.Body]++
		}
	}
	if hops["body 30h"] < 2 || hops["body 3h"] != 0 {
		t.Errorf("re-sent copies: %v, want the 30h message re-sent at least twice, the 3h one never", hops)
	}
	rec.mu.Lock()
	for id, n := range rec.counts {
		if n > 2 {
			t.Errorf("copy %s was received %d times: holding counted against maxReceiveCount more than once", id, n)
		}
	}
	rec.mu.Unlock()
	if n := len(f.Messages(dlq)); n != 0 {
		t.Errorf("%d messages in the dead-letter queue", n)
	}
	if n := len(f.Messages(url)); n != 0 {
		t.Errorf("%d messages left in the queue", n)
	}
	for _, p := range f.Problems() {
		t.Errorf("SQS contract violation: %s", p)
	}
}

// startWorker starts one worker of the runtime and returns its stop.
func startWorker(t *testing.T, runtime string, client *receiveLog, url, arn string, handler consumer.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	switch runtime {
	case "consumer":
		c, err := consumer.New(consumer.Config{Client: client, QueueURL: url, Handler: handler})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(done)
			if err := c.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	default:
		h, err := sqslambda.New(sqslambda.Config{Client: client.Fake, Handler: handler})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(done)
			eventSourceMapping(ctx, t, client, url, arn, h)
		}()
	}
	return func() {
		cancel()
		<-done
	}
}

// eventSourceMapping polls as an event source mapping does until ctx
// ends: long polls of 20 s, each batch handed to h, the records not
// reported as failures deleted.
func eventSourceMapping(ctx context.Context, t *testing.T, client *receiveLog, url, arn string, h *sqslambda.Handler) {
	for ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil || len(out.Messages) == 0 {
			continue
		}
		ictx, cancel := context.WithTimeout(context.Background(), time.Minute)
		resp, err := h.Handle(ictx, event(arn, out.Messages))
		cancel()
		if err != nil {
			t.Errorf("Handle: %v", err)
			return
		}
		failed := map[string]bool{}
		for _, x := range resp.BatchItemFailures {
			failed[x.ItemIdentifier] = true
		}
		for _, m := range out.Messages {
			if failed[aws.ToString(m.MessageId)] {
				continue
			}
			if _, err := client.Fake.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Errorf("delete: %v", err)
			}
		}
	}
}
