package sqslambdatest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
	"github.com/sqsonce/sqsonce/sqslambda/sqslambdatest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// queues makes a queue "orders" (orders.fifo when fifo) with a 60 s
// visibility timeout and its dead-letter queue on a new fake, and returns
// the fake and both URLs.
func queues(fifo bool) (f *sqsfake.Fake, url, dlq string) {
	f = sqsfake.New()
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	dlq = f.AddQueue("orders-dlq"+suffix, nil)
	url = f.AddQueue("orders"+suffix, map[string]string{
		"VisibilityTimeout": "60",
		"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq` + suffix + `","maxReceiveCount":"100"}`,
	})
	return f, url, dlq
}

// send sends body to url with the given message attributes (name →
// string value); on a FIFO queue group is the MessageGroupId.
func send(t *testing.T, f *sqsfake.Fake, url, body, group string, attrs map[string]string) string {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}
	if group != "" {
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(fmt.Sprintf("%s-%d", body, time.Now().UnixNano()))
	}
	for k, v := range attrs {
		if in.MessageAttributes == nil {
			in.MessageAttributes = map[string]types.MessageAttributeValue{}
		}
		in.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	out, err := f.SendMessage(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

// mapping returns a Mapping on url invoking fn.
func mapping(t *testing.T, f *sqsfake.Fake, url string, fn func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), mod ...func(*sqslambdatest.Config)) *sqslambdatest.Mapping {
	t.Helper()
	cfg := sqslambdatest.Config{Client: f, QueueURL: url, HandleFunc: fn}
	for _, m := range mod {
		m(&cfg)
	}
	esm, err := sqslambdatest.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return esm
}

// fails returns a function that reports the records whose body is in
// bodies as batch item failures.
func fails(bodies ...string) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			if slices.Contains(bodies, r.Body) {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}
}

// states returns each message's body → state in the fake's queue.
func states(f *sqsfake.Fake, url string) map[string]sqsfake.State {
	out := map[string]sqsfake.State{}
	for _, m := range f.Messages(url) {
		out[m.Body] = m.State
	}
	return out
}

// The event is the one Lambda builds: every field of a record, the
// attributes with Lambda's casing, and the FIFO system attributes.
func TestEvent(t *testing.T) {
	f, url, _ := queues(false)
	in := &sqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: aws.String(`{"order_id":"o-1"}`),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"sqsonce-id": {DataType: aws.String("String"), StringValue: aws.String("job-1")},
			"amount":     {DataType: aws.String("Number"), StringValue: aws.String("42")},
			"blob":       {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},
		},
	}
	sent, err := f.SendMessage(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var got events.SQSEvent
	esm := mapping(t, f, url, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		got = ev
		return events.SQSEventResponse{}, nil
	})
	if esm.QueueARN() != "arn:aws:sqs:us-east-1:123456789012:orders" {
		t.Errorf("QueueARN = %q", esm.QueueARN())
	}
	res, err := esm.Poll(context.Background())
	if err != nil || res.Err != nil {
		t.Fatalf("Poll = %v, %v", res.Err, err)
	}
	if len(got.Records) != 1 {
		t.Fatalf("%d records, want 1", len(got.Records))
	}
	r := got.Records[0]
	for name, c := range map[string][2]string{
		"messageId":      {r.MessageId, aws.ToString(sent.MessageId)},
		"body":           {r.Body, `{"order_id":"o-1"}`},
		"md5OfBody":      {r.Md5OfBody, aws.ToString(sent.MD5OfMessageBody)},
		"eventSource":    {r.EventSource, "aws:sqs"},
		"eventSourceARN": {r.EventSourceARN, "arn:aws:sqs:us-east-1:123456789012:orders"},
		"awsRegion":      {r.AWSRegion, "us-east-1"},
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	if r.ReceiptHandle == "" {
		t.Error("no receiptHandle")
	}
	for _, a := range []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} {
		if r.Attributes[a] == "" {
			t.Errorf("attributes lack %s: %v", a, r.Attributes)
		}
	}
	if r.Attributes["ApproximateReceiveCount"] != "1" {
		t.Errorf("ApproximateReceiveCount = %q, want 1", r.Attributes["ApproximateReceiveCount"])
	}
	if !slices.Equal(res.Invoked, []string{r.MessageId}) || !slices.Equal(res.Deleted, res.Invoked) || len(res.Failed) != 0 {
		t.Errorf("Result invoked %v, deleted %v, failed %v", res.Invoked, res.Deleted, res.Failed)
	}

	// On the wire: Lambda's JSON names, empty lists as [].
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Records []map[string]json.RawMessage
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(wire.Records[0]))
	want := []string{"attributes", "awsRegion", "body", "eventSource", "eventSourceARN", "md5OfBody", "md5OfMessageAttributes", "messageAttributes", "messageId", "receiptHandle"}
	if !slices.Equal(keys, want) {
		t.Errorf("record keys %v, want %v", keys, want)
	}
	var attrs map[string]map[string]any
	if err := json.Unmarshal(wire.Records[0]["messageAttributes"], &attrs); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"sqsonce-id": `{"binaryListValues":[],"dataType":"String","stringListValues":[],"stringValue":"job-1"}`,
		"amount":     `{"binaryListValues":[],"dataType":"Number","stringListValues":[],"stringValue":"42"}`,
		"blob":       `{"binaryListValues":[],"binaryValue":"AQID","dataType":"Binary","stringListValues":[]}`,
	} {
		got, _ := json.Marshal(attrs[name]) // map keys sorted
		if string(got) != want {
			t.Errorf("messageAttributes[%s] = %s, want %s", name, got, want)
		}
	}

	// FIFO records carry the group, deduplication id and sequence number.
	f, url, _ = queues(true)
	send(t, f, url, "a", "g-1", nil)
	esm = mapping(t, f, url, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		got = ev
		return events.SQSEventResponse{}, nil
	})
	if _, err := esm.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := got.Records[0].Attributes
	if a["MessageGroupId"] != "g-1" || a["MessageDeduplicationId"] == "" || a["SequenceNumber"] == "" {
		t.Errorf("FIFO attributes %v", a)
	}
	if got.Records[0].EventSourceARN != "arn:aws:sqs:us-east-1:123456789012:orders.fifo" {
		t.Errorf("eventSourceARN %q", got.Records[0].EventSourceARN)
	}
}

// Event copies what it is given and computes md5OfBody when the receive
// left it out.
func TestEventCopies(t *testing.T) {
	m := types.Message{
		MessageId: aws.String("m-1"), ReceiptHandle: aws.String("h-1"), Body: aws.String("Test message."),
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"b": {DataType: aws.String("Binary"), BinaryValue: []byte("x")},
		},
	}
	ev := sqslambdatest.Event("arn:aws:sqs:eu-west-1:111122223333:q", []types.Message{m})
	r := ev.Records[0]
	if r.Md5OfBody != "e4e68fb7bd0e697a0ae8f1bb342846b3" { // as in the sample event of the Lambda docs
		t.Errorf("md5OfBody = %q", r.Md5OfBody)
	}
	if r.AWSRegion != "eu-west-1" {
		t.Errorf("awsRegion = %q", r.AWSRegion)
	}
	m.Attributes["ApproximateReceiveCount"] = "9"
	m.MessageAttributes["b"].BinaryValue[0] = 'y'
	if r.Attributes["ApproximateReceiveCount"] != "1" || string(r.MessageAttributes["b"].BinaryValue) != "x" {
		t.Error("the event shares memory with the messages")
	}
}

// The successes are deleted, the reported failures stay in flight and
// come back when the queue's visibility timeout ends, received again.
func TestPartialBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, _ := queues(false)
		ok := send(t, f, url, "ok", "", nil)
		bad := send(t, f, url, "bad", "", nil)
		esm := mapping(t, f, url, fails("bad"))
		res, err := esm.Poll(context.Background())
		if err != nil || res.Err != nil {
			t.Fatalf("Poll = %v, %v", res.Err, err)
		}
		if !slices.Equal(res.Deleted, []string{ok}) || !slices.Equal(res.Failed, []string{bad}) || len(res.Invoked) != 2 {
			t.Fatalf("invoked %v, deleted %v, failed %v; want deleted [%s], failed [%s]", res.Invoked, res.Deleted, res.Failed, ok, bad)
		}
		if s := states(f, url); len(s) != 1 || s["bad"] != sqsfake.InFlight {
			t.Fatalf("queue %v, want only bad, in flight", s)
		}
		// Nothing until the visibility timeout (60 s) ends.
		if res, err := esm.Poll(context.Background()); err != nil || len(res.Invoked) != 0 {
			t.Fatalf("second Poll = %v, %v; want nothing received", res.Invoked, err)
		}
		time.Sleep(60 * time.Second)
		var count string
		esm = mapping(t, f, url, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			count = ev.Records[0].Attributes["ApproximateReceiveCount"]
			return events.SQSEventResponse{}, nil
		})
		res, err = esm.Poll(context.Background())
		if err != nil || !slices.Equal(res.Deleted, []string{bad}) {
			t.Fatalf("after the visibility: deleted %v, %v; want [%s]", res.Deleted, err, bad)
		}
		if count != "2" {
			t.Errorf("ApproximateReceiveCount = %s, want 2", count)
		}
		if n := len(f.Messages(url)); n != 0 {
			t.Errorf("%d messages left", n)
		}
	})
}

// A returned error, a panic, a timeout and every invalid response AWS
// documents fail the whole batch: nothing is deleted.
func TestWholeBatchFails(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		fn   func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
		want error // nil: checked by text
		text string
	}{
		{"error", func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, boom
		}, boom, "boom"},
		{"error with a response", func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ev.Records[0].MessageId}}}, boom
		}, boom, "boom"},
		{"panic", func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			panic("kaput")
		}, nil, "panicked: kaput"},
		{"timeout", func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
			<-ctx.Done() // runs to its deadline, then returns "success"
			return events.SQSEventResponse{}, nil
		}, sqslambdatest.ErrTimedOut, "timed out after 30s"},
		{"empty itemIdentifier", func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ""}}}, nil
		}, sqslambdatest.ErrInvalidResponse, "empty itemIdentifier"},
		{"unknown itemIdentifier", func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "not-in-the-batch"}}}, nil
		}, sqslambdatest.ErrInvalidResponse, `"not-in-the-batch" is not a messageId of the batch`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, url, _ := queues(false)
				send(t, f, url, "a", "", nil)
				send(t, f, url, "b", "", nil)
				res, err := mapping(t, f, url, tc.fn).Poll(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if res.Err == nil || (tc.want != nil && !errors.Is(res.Err, tc.want)) || !strings.Contains(res.Err.Error(), tc.text) {
					t.Errorf("Err = %v, want %v containing %q", res.Err, tc.want, tc.text)
				}
				if len(res.Deleted) != 0 || !slices.Equal(res.Failed, res.Invoked) || len(res.Invoked) != 2 {
					t.Errorf("invoked %v, deleted %v, failed %v; want all failed", res.Invoked, res.Deleted, res.Failed)
				}
				if s := states(f, url); len(s) != 2 || s["a"] != sqsfake.InFlight || s["b"] != sqsfake.InFlight {
					t.Errorf("queue %v, want both in flight", s)
				}
			})
		})
	}
}

// The function's context ends FunctionTimeout after the invocation starts
// and carries a Lambda context with a request id.
func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, _ := queues(false)
		send(t, f, url, "a", "", nil)
		var left time.Duration
		var reqID string
		esm := mapping(t, f, url, func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
			dl, _ := ctx.Deadline()
			left = time.Until(dl)
			if lc, ok := lambdacontext.FromContext(ctx); ok {
				reqID = lc.AwsRequestID
			}
			return events.SQSEventResponse{}, nil
		}, func(c *sqslambdatest.Config) { c.FunctionTimeout = 12 * time.Second })
		if _, err := esm.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if left != 12*time.Second {
			t.Errorf("time left at the start = %s, want 12s", left)
		}
		if reqID == "" {
			t.Error("no lambdacontext.LambdaContext with an AwsRequestID")
		}
	})
}

func TestNewChecks(t *testing.T) {
	f, url, _ := queues(false)
	fifo := f.AddQueue("jobs.fifo", nil)
	short := f.AddQueue("short", map[string]string{"VisibilityTimeout": "10"})
	fn := fails()
	for _, tc := range []struct {
		cfg  sqslambdatest.Config
		want string
	}{
		{sqslambdatest.Config{QueueURL: url, HandleFunc: fn}, "Config.Client is required"},
		{sqslambdatest.Config{Client: f, HandleFunc: fn}, "Config.QueueURL is required"},
		{sqslambdatest.Config{Client: f, QueueURL: url}, "Config.HandleFunc is required"},
		{sqslambdatest.Config{Client: f, QueueURL: url, HandleFunc: fn, BatchSize: -1}, "BatchSize -1 is negative"},
		{sqslambdatest.Config{Client: f, QueueURL: url, HandleFunc: fn, BatchSize: 10001}, "BatchSize 10001 is over 10000"},
		{sqslambdatest.Config{Client: f, QueueURL: fifo, HandleFunc: fn, BatchSize: 11}, "BatchSize 11 is over 10"},
		{sqslambdatest.Config{Client: f, QueueURL: url, HandleFunc: fn, WaitTime: 1500 * time.Millisecond}, "WaitTime 1.5s must be whole seconds"},
		{sqslambdatest.Config{Client: f, QueueURL: url, HandleFunc: fn, WaitTime: 21 * time.Second}, "from 0 to 20s"},
		{sqslambdatest.Config{Client: f, QueueURL: url, HandleFunc: fn, FunctionTimeout: -time.Second}, "FunctionTimeout -1s is negative"},
		{sqslambdatest.Config{Client: f, QueueURL: url, HandleFunc: fn, EmptyReceives: -1}, "EmptyReceives -1 is negative"},
		{sqslambdatest.Config{Client: f, QueueURL: short, HandleFunc: fn}, "visibility timeout 10s is less than Config.FunctionTimeout 30s"},
		{sqslambdatest.Config{Client: f, QueueURL: url + "-missing", HandleFunc: fn}, "read attributes of queue"},
	} {
		_, err := sqslambdatest.New(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sqslambdatest: ") {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := sqslambdatest.New(context.Background(), sqslambdatest.Config{Client: f, QueueURL: short, HandleFunc: fn, FunctionTimeout: 10 * time.Second}); err != nil {
		t.Errorf("visibility = function timeout: %v", err)
	}
}

// A batch over 10 is gathered from several receives.
func TestLargeBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, _ := queues(false)
		for i := range 25 {
			send(t, f, url, fmt.Sprint(i), "", nil)
		}
		sizes := []int{}
		esm := mapping(t, f, url, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			sizes = append(sizes, len(ev.Records))
			return events.SQSEventResponse{}, nil
		}, func(c *sqslambdatest.Config) { c.BatchSize = 20 })
		res, err := esm.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sizes, []int{20, 5}) || len(res) != 2 {
			t.Errorf("batches of %v, want [20 5]", sizes)
		}
		if n := len(f.Messages(url)); n != 0 {
			t.Errorf("%d messages left", n)
		}
	})
}

// A delete SQS refuses is reported by Poll, and the message is not in
// Deleted.
func TestDeleteRefused(t *testing.T) {
	f, url, _ := queues(false)
	a := send(t, f, url, "a", "", nil)
	b := send(t, f, url, "b", "", nil)
	f.Inject(func(op string, in any) sqsfake.Fault {
		if op != "DeleteMessageBatch" {
			return sqsfake.Fault{}
		}
		for _, e := range in.(*sqs.DeleteMessageBatchInput).Entries {
			for _, m := range f.Messages(url) {
				if m.Body == "b" && m.ReceiptHandle == aws.ToString(e.ReceiptHandle) {
					return sqsfake.Fault{FailEntries: map[string]string{aws.ToString(e.Id): "InternalError"}}
				}
			}
		}
		return sqsfake.Fault{}
	})
	res, err := mapping(t, f, url, fails()).Poll(context.Background())
	if err == nil || !strings.Contains(err.Error(), "delete message "+b) || !strings.Contains(err.Error(), "InternalError") {
		t.Errorf("Poll error = %v, want the refused delete of %s", err, b)
	}
	if !slices.Equal(res.Deleted, []string{a}) {
		t.Errorf("deleted %v, want [%s]", res.Deleted, a)
	}
}

// The sqslambda adapter under the mapping: a transient failure is
// reported and comes back, a permanent one is dead-lettered by sqsonce and
// reported as a success, so the mapping deletes it.
func TestSQSLambda(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, dlq := queues(false)
		tries := map[string]int{}
		h, err := sqslambda.New(sqslambda.Config{
			Client: f,
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				tries[m.Body]++
				switch {
				case m.Body == "malformed":
					return consumer.Permanent(errors.New("cannot parse"))
				case m.Body == "busy" && tries[m.Body] == 1:
					return consumer.RetryAfter(errors.New("warehouse busy"), 5*time.Second)
				}
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, b := range []string{"ok", "malformed", "busy"} {
			ids[send(t, f, url, b, "", nil)] = b
		}
		esm := mapping(t, f, url, h.Handle, func(c *sqslambdatest.Config) { c.EmptyReceives = 10 })
		results, err := esm.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 2 {
			t.Fatalf("%d invocations, want 2 (the batch, then the retry)", len(results))
		}
		bodies := func(ids0 []string) []string {
			var out []string
			for _, id := range ids0 {
				out = append(out, ids[id])
			}
			slices.Sort(out)
			return out
		}
		first, retry := results[0], results[1]
		if got := bodies(first.Failed); !slices.Equal(got, []string{"busy"}) {
			t.Errorf("first batch failed %v, want [busy]", got)
		}
		if got := bodies(first.Deleted); !slices.Equal(got, []string{"malformed", "ok"}) {
			t.Errorf("first batch deleted %v, want [malformed ok]", got)
		}
		if got := bodies(retry.Deleted); !slices.Equal(got, []string{"busy"}) || retry.Event.Records[0].Attributes["ApproximateReceiveCount"] != "2" {
			t.Errorf("retry deleted %v (receive %s), want [busy], received twice", got, retry.Event.Records[0].Attributes["ApproximateReceiveCount"])
		}
		sent := f.Sent(dlq)
		if len(sent) != 1 || sent[0].Body != "malformed" {
			t.Fatalf("DLQ got %v, want the malformed message", sent)
		}
		if fl, ok := deadletter.ParseFailure(sent[0].Attributes); !ok || fl.Class != "permanent" {
			t.Errorf("dead letter's failure %+v (%v), want class permanent", fl, ok)
		}
		if n := len(f.Messages(url)); n != 0 {
			t.Errorf("%d messages left in the queue", n)
		}
	})
}

// On a FIFO queue sqslambda stops a message group at its first failure:
// the group's later records are reported too, so none is deleted out of
// order. A function that reports only the failure breaks the order, and
// the Result says so.
func TestFIFOOrder(t *testing.T) {
	handler := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		if m.Body == "g1-2" {
			return errors.New("transient")
		}
		return nil
	})
	for _, tc := range []struct {
		name                    string
		fn                      func(f *sqsfake.Fake) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
		failed, deleted, broken []string
	}{
		{"sqslambda", func(f *sqsfake.Fake) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			h, err := sqslambda.New(sqslambda.Config{Client: f, Handler: handler})
			if err != nil {
				t.Fatal(err)
			}
			return h.Handle
		}, []string{"g1-2", "g1-3"}, []string{"g1-1", "g2-1"}, nil},
		{"reports only the failure", func(*sqsfake.Fake) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return fails("g1-2")
		}, []string{"g1-2"}, []string{"g1-1", "g1-3", "g2-1"}, []string{"g1-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, url, _ := queues(true)
			ids := map[string]string{}
			for _, b := range []string{"g1-1", "g1-2", "g1-3", "g2-1"} {
				ids[send(t, f, url, b, b[:2], nil)] = b
			}
			res, err := mapping(t, f, url, tc.fn(f)).Poll(context.Background())
			if err != nil || res.Err != nil {
				t.Fatalf("Poll = %v, %v", res.Err, err)
			}
			if len(res.Invoked) != 4 {
				t.Fatalf("invoked %d records, want 4 in one batch", len(res.Invoked))
			}
			names := func(in []string) []string {
				var out []string
				for _, id := range in {
					out = append(out, ids[id])
				}
				slices.Sort(out)
				return out
			}
			if got := names(res.Failed); !slices.Equal(got, tc.failed) {
				t.Errorf("failed %v, want %v", got, tc.failed)
			}
			if got := names(res.Deleted); !slices.Equal(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			if got := names(res.OutOfOrder); !slices.Equal(got, tc.broken) {
				t.Errorf("out of order %v, want %v", got, tc.broken)
			}
		})
	}
}

// Drain stops after EmptyReceives empty receives in a row, and ends with
// ctx's error when ctx ends first.
func TestDrainStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, _ := queues(false)
		send(t, f, url, "a", "", nil)
		esm := mapping(t, f, url, fails(), func(c *sqslambdatest.Config) { c.EmptyReceives = 4; c.WaitTime = 2 * time.Second })
		start := time.Now()
		res, err := esm.Drain(context.Background())
		if err != nil || len(res) != 1 {
			t.Fatalf("Drain = %d results, %v", len(res), err)
		}
		if waited := time.Since(start); waited != 8*time.Second {
			t.Errorf("Drain waited %s after the last message, want 4 empty receives of 2s", waited)
		}

		// A message that always fails comes back every 60 s: only ctx ends
		// the drain.
		send(t, f, url, "poison", "", nil)
		esm = mapping(t, f, url, fails("poison"), func(c *sqslambdatest.Config) { c.EmptyReceives = 70 })
		ctx, cancel := context.WithTimeout(context.Background(), 190*time.Second)
		defer cancel()
		res, err = esm.Drain(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Drain error = %v, want the context's", err)
		}
		if len(res) != 4 { // at 0, 60, 120 and 180 s
			t.Errorf("%d invocations, want 4", len(res))
		}
	})
}
