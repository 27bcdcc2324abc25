package sqslambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// The SDK's HTTP client keeps idle connections open between tests; their
// goroutines belong to net/http, not to the adapter.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// scripted is a handler whose behaviour each message's body names:
// "ack", "dup" (already completed), "retry" (RetryAfter 30s), "fail" (a
// plain error: backoff), "perm" (Permanent), "panic", "down" (Unavailable
// with a Retry-After of 45s). It records the
// MessageIds it ran, in order.
type scripted struct {
	mu  sync.Mutex
	ran []string
}

func (s *scripted) Handle(_ context.Context, msg *consumer.Message) error {
	s.mu.Lock()
	s.ran = append(s.ran, msg.ID)
	s.mu.Unlock()
	switch cmd, _, _ := strings.Cut(msg.Body, " "); cmd {
	case "ack":
		return nil
	case "dup":
		return fmt.Errorf("test: %w", consumer.ErrDuplicate)
	case "retry":
		return consumer.RetryAfter(errors.New("busy"), 30*time.Second)
	case "fail":
		return errors.New("flaky downstream")
	case "perm":
		return consumer.Permanent(errors.New("malformed order"))
	case "panic":
		panic("boom")
	case "down":
		return consumer.Unavailable(errors.New("bank: 503 Service Unavailable"), 45*time.Second)
	}
	return fmt.Errorf("test: unknown command %q", msg.Body)
}

func (s *scripted) runs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ran...)
}

func newHandler(t *testing.T, client sqslambda.SQSAPI, h consumer.Handler, mod func(*sqslambda.Config)) *sqslambda.Handler {
	t.Helper()
	cfg := sqslambda.Config{
		Client:  client,
		Handler: h,
		// The delay of a plain failure is always the ceiling: 10s on the
		// first receive.
		Backoff: consumer.Backoff{Base: 10 * time.Second, RandFunc: func(n int64) int64 { return n - 1 }},
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := sqslambda.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestHandleOutcomes(t *testing.T) {
	t.Parallel()
	std := func(id, body string) events.SQSMessage { return rec(stdARN, id, body, "") }
	fifo := func(id, body, group string) events.SQSMessage { return rec(fifoARN, id, body, group) }
	tests := []struct {
		name        string
		concurrency int
		records     []events.SQSMessage
		// wantFailures are the batchItemFailures, in record order.
		wantFailures string
		// wantNotRun are the records the handler must not run.
		wantNotRun []string
		// wantVisibility is the visibility set per failed record.
		wantVisibility map[string][]int32
		// wantDeadLetters are the MessageIds sent to the DLQ.
		wantDeadLetters []string
		wantDLQ         string
	}{
		{
			name:           "standard: every record acked",
			records:        []events.SQSMessage{std("m1", "ack"), std("m2", "ack"), std("m3", "dup")},
			wantFailures:   "",
			wantVisibility: map[string][]int32{},
		},
		{
			name: "standard: mixed outcomes",
			records: []events.SQSMessage{
				std("m1", "ack"), std("m2", "retry"), std("m3", "perm"),
				std("m4", "dup"), std("m5", "panic"), std("m6", "fail"), std("m7", "ack"),
			},
			wantFailures:    "m2,m5,m6",
			wantVisibility:  map[string][]int32{"rh-m2": {30}, "rh-m5": {10}, "rh-m6": {10}},
			wantDeadLetters: []string{"m3"},
			wantDLQ:         dlqURL,
		},
		{
			name:        "standard: mixed outcomes, 4 at once",
			concurrency: 4,
			records: []events.SQSMessage{
				std("m1", "ack"), std("m2", "retry"), std("m3", "perm"),
				std("m4", "dup"), std("m5", "panic"), std("m6", "fail"), std("m7", "ack"),
			},
			wantFailures:    "m2,m5,m6",
			wantVisibility:  map[string][]int32{"rh-m2": {30}, "rh-m5": {10}, "rh-m6": {10}},
			wantDeadLetters: []string{"m3"},
			wantDLQ:         dlqURL,
		},
		{
			// Behind a retry the group's later records keep its visibility,
			// so the group comes back together; a dead letter, like an
			// ack, lets them run.
			name: "fifo: a failure stops the rest of its group only, a dead letter does not",
			records: []events.SQSMessage{
				fifo("a1", "ack", "A"), fifo("b1", "ack", "B"), fifo("a2", "fail", "A"),
				fifo("c1", "perm", "C"), fifo("a3", "ack", "A"), fifo("b2", "dup", "B"),
				fifo("c2", "ack", "C"), fifo("a4", "ack", "A"),
			},
			wantFailures:    "a2,a3,a4",
			wantNotRun:      []string{"a3", "a4"},
			wantVisibility:  map[string][]int32{"rh-a2": {10}, "rh-a3": {10}, "rh-a4": {10}},
			wantDeadLetters: []string{"c1"},
			wantDLQ:         fdlqURL,
		},
		{
			name:        "fifo: groups in parallel, each in order",
			concurrency: 3,
			records: []events.SQSMessage{
				fifo("a1", "ack", "A"), fifo("b1", "retry", "B"), fifo("a2", "panic", "A"),
				fifo("b2", "ack", "B"), fifo("c1", "ack", "C"), fifo("a3", "ack", "A"),
				fifo("c2", "perm", "C"), fifo("c3", "ack", "C"),
			},
			wantFailures:    "b1,a2,b2,a3",
			wantNotRun:      []string{"b2", "a3"},
			wantVisibility:  map[string][]int32{"rh-b1": {30}, "rh-a2": {10}, "rh-b2": {30}, "rh-a3": {10}},
			wantDeadLetters: []string{"c2"},
			wantDLQ:         fdlqURL,
		},
		{
			// The consumer would pause and hold the rest; an invocation
			// cannot, so the records not started come back after the same
			// delay, not run against the downstream that is down.
			name: "standard: a downstream unavailable holds back the rest of the batch",
			records: []events.SQSMessage{
				std("m1", "ack"), std("m2", "down"), std("m3", "ack"), std("m4", "perm"),
			},
			wantFailures:   "m2,m3,m4",
			wantNotRun:     []string{"m3", "m4"},
			wantVisibility: map[string][]int32{"rh-m2": {45}, "rh-m3": {45}, "rh-m4": {45}},
		},
		{
			name: "fifo: a downstream unavailable holds back every group",
			records: []events.SQSMessage{
				fifo("a1", "ack", "A"), fifo("b1", "down", "B"), fifo("a2", "ack", "A"),
				fifo("b2", "ack", "B"), fifo("c1", "ack", "C"),
			},
			wantFailures:   "b1,b2,c1",
			wantNotRun:     []string{"b2", "c1"},
			wantVisibility: map[string][]int32{"rh-b1": {45}, "rh-b2": {45}, "rh-c1": {45}},
		},
		{
			name: "fifo: the first record fails",
			records: []events.SQSMessage{
				fifo("a1", "retry", "A"), fifo("a2", "ack", "A"), fifo("a3", "perm", "A"),
			},
			wantFailures:   "a1,a2,a3",
			wantNotRun:     []string{"a2", "a3"},
			wantVisibility: map[string][]int32{"rh-a1": {30}, "rh-a2": {30}, "rh-a3": {30}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			h := &scripted{}
			a := newHandler(t, fake, h, func(c *sqslambda.Config) { c.Concurrency = tt.concurrency })
			resp, err := a.Handle(context.Background(), fake.event(tt.records...))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if got := failures(resp); got != tt.wantFailures {
				t.Errorf("batchItemFailures = %q, want %q", got, tt.wantFailures)
			}
			ran := h.runs()
			for _, r := range tt.records {
				if want := !slices.Contains(tt.wantNotRun, r.MessageId); slices.Contains(ran, r.MessageId) != want {
					t.Errorf("record %s ran=%v, want %v", r.MessageId, !want, want)
				}
			}
			if len(ran) != len(tt.records)-len(tt.wantNotRun) {
				t.Errorf("handler ran %d times (%v), want %d", len(ran), ran, len(tt.records)-len(tt.wantNotRun))
			}
			// FIFO order within each group.
			pos := map[string]int{}
			for i, id := range ran {
				pos[id] = i
			}
			for i, r := range tt.records {
				for _, later := range tt.records[i+1:] {
					g := r.Attributes["MessageGroupId"]
					if g == "" || later.Attributes["MessageGroupId"] != g {
						continue
					}
					pi, ok1 := pos[r.MessageId]
					pl, ok2 := pos[later.MessageId]
					if ok1 && ok2 && pi > pl {
						t.Errorf("group %s: %s ran after %s", g, r.MessageId, later.MessageId)
					}
				}
			}
			if tt.wantVisibility != nil {
				if got := fake.visibilities(); !maps.EqualFunc(got, tt.wantVisibility, slices.Equal) {
					t.Errorf("visibility changes = %v, want %v", got, tt.wantVisibility)
				}
			}
			var dl []string
			for _, in := range fake.sent() {
				if got := aws.ToString(in.QueueUrl); got != tt.wantDLQ {
					t.Errorf("dead letter sent to %s, want %s", got, tt.wantDLQ)
				}
				var f deadletter.Failure
				if err := json.Unmarshal([]byte(aws.ToString(in.MessageAttributes[deadletter.AttrFailure].StringValue)), &f); err != nil {
					t.Errorf("dead letter without a valid %s: %v", deadletter.AttrFailure, err)
				}
				if f.Class != consumer.ClassPermanent || f.Error == "" || f.Attempts != 1 {
					t.Errorf("failure = %+v, want class permanent, an error, 1 attempt", f)
				}
				if strings.HasSuffix(tt.wantDLQ, ".fifo") {
					if aws.ToString(in.MessageGroupId) == "" || aws.ToString(in.MessageDeduplicationId) != f.OriginalMessageID {
						t.Errorf("FIFO dead letter: group %q, dedup id %q, want the group and %q",
							aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId), f.OriginalMessageID)
					}
				}
				dl = append(dl, f.OriginalMessageID)
			}
			if !slices.Equal(dl, tt.wantDeadLetters) {
				t.Errorf("dead letters = %v, want %v", dl, tt.wantDeadLetters)
			}
		})
	}
}

func TestDeadLetterFailureIsReported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(*fakeSQS)
	}{
		{"send fails", func(f *fakeSQS) { f.sendErr = errors.New("throttled") }},
		{"no redrive policy", func(f *fakeSQS) { dropRedrivePolicy(f, stdURL) }},
		{"dead-letter queue missing", func(f *fakeSQS) {
			_, _ = f.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(dlqURL)})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			tt.setup(fake)
			a := newHandler(t, fake, &scripted{}, nil)
			resp, _ := a.Handle(context.Background(), fake.event(
				rec(stdARN, "m1", "perm", ""), rec(stdARN, "m2", "ack", ""),
			))
			if got := failures(resp); got != "m1" {
				t.Errorf("batchItemFailures = %q, want m1 (a dead letter that was not sent must come back)", got)
			}
			if v := fake.visibilities()["rh-m1"]; !slices.Equal(v, []int32{10}) {
				t.Errorf("m1 visibility changes %v, want [10]: retried after the backoff delay", v)
			}
		})
	}
}

// dropRedrivePolicy removes a queue's RedrivePolicy.
func dropRedrivePolicy(f *fakeSQS, url string) {
	if _, err := f.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{
		QueueUrl: aws.String(url), Attributes: map[string]string{"RedrivePolicy": ""},
	}); err != nil {
		panic(err)
	}
}

func TestConfiguredDeadLetterQueue(t *testing.T) {
	t.Parallel()
	fake := newFake()
	dropRedrivePolicy(fake, stdURL)
	elsewhere := fake.AddQueue("elsewhere", nil)
	a := newHandler(t, fake, &scripted{}, func(c *sqslambda.Config) { c.DeadLetterQueueURL = elsewhere })
	resp, _ := a.Handle(context.Background(), fake.event(rec(stdARN, "m1", "perm", "")))
	if got := failures(resp); got != "" {
		t.Errorf("batchItemFailures = %q, want none", got)
	}
	if s := fake.sent(); len(s) != 1 || aws.ToString(s[0].QueueUrl) != elsewhere {
		t.Errorf("dead letters = %v, want one to the configured queue", s)
	}
}

func TestUnresolvableQueue(t *testing.T) {
	t.Parallel()
	fake := newFake()
	fake.urlErr = errors.New("access denied")
	h := &scripted{}
	a := newHandler(t, fake, h, nil)
	resp, _ := a.Handle(context.Background(), fake.event(
		rec(stdARN, "m1", "ack", ""), rec(stdARN, "m2", "perm", ""),
	))
	if got := failures(resp); got != "m1,m2" {
		t.Errorf("batchItemFailures = %q, want m1,m2", got)
	}
	if r := h.runs(); len(r) != 0 {
		t.Errorf("handler ran %v without a queue to settle on", r)
	}
	// The next invocation asks again.
	fake.mu.Lock()
	fake.urlErr = nil
	fake.mu.Unlock()
	resp, _ = a.Handle(context.Background(), fake.event(rec(stdARN, "m1", "ack", "")))
	if got := failures(resp); got != "" {
		t.Errorf("after recovery: batchItemFailures = %q, want none", got)
	}
}

func TestQueueLookupsAreCached(t *testing.T) {
	t.Parallel()
	fake := newFake()
	a := newHandler(t, fake, &scripted{}, nil)
	for i := range 3 {
		_, _ = a.Handle(context.Background(), fake.event(
			rec(stdARN, fmt.Sprint("p", i), "perm", ""), rec(stdARN, fmt.Sprint("a", i), "ack", ""),
		))
	}
	// One GetQueueUrl for the queue, one for its DLQ; one GetQueueAttributes
	// for the queue, one for its DLQ's MaximumMessageSize.
	if u, a := fake.Calls("GetQueueUrl"), fake.Calls("GetQueueAttributes"); u != 2 || a != 2 {
		t.Errorf("GetQueueUrl ×%d, GetQueueAttributes ×%d; want 2 and 2", u, a)
	}
	if n := len(fake.sent()); n != 3 {
		t.Errorf("%d dead letters, want 3", n)
	}
}

func TestMaxAttempts(t *testing.T) {
	t.Parallel()
	fake := newFake()
	a := newHandler(t, fake, &scripted{}, func(c *sqslambda.Config) { c.MaxAttempts = 3 })
	r1 := rec(stdARN, "m1", "fail", "")
	r3 := rec(stdARN, "m3", "fail", "")
	r3.Attributes["ApproximateReceiveCount"] = "3"
	resp, _ := a.Handle(context.Background(), fake.event(r1, r3))
	if got := failures(resp); got != "m1" {
		t.Errorf("batchItemFailures = %q, want m1", got)
	}
	s := fake.sent()
	if len(s) != 1 {
		t.Fatalf("%d dead letters, want 1", len(s))
	}
	var f deadletter.Failure
	_ = json.Unmarshal([]byte(aws.ToString(s[0].MessageAttributes[deadletter.AttrFailure].StringValue)), &f)
	if f.Class != consumer.ClassMaxAttempts || f.Attempts != 3 || f.OriginalMessageID != "m3" {
		t.Errorf("failure = %+v, want max_attempts after 3 attempts of m3", f)
	}
}

// TestUnavailableIsNoAttempt: a record whose downstream is unavailable
// is retried after the Retry-After on its MaxAttempts-th receive, not
// dead-lettered.
func TestUnavailableIsNoAttempt(t *testing.T) {
	t.Parallel()
	fake := newFake()
	a := newHandler(t, fake, &scripted{}, func(c *sqslambda.Config) { c.MaxAttempts = 3 })
	r := rec(stdARN, "m1", "down", "")
	r.Attributes["ApproximateReceiveCount"] = "3"
	resp, _ := a.Handle(context.Background(), fake.event(r))
	if got := failures(resp); got != "m1" {
		t.Errorf("batchItemFailures = %q, want m1", got)
	}
	if n := len(fake.sent()); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	if got := fake.visibilities()["rh-m1"]; !slices.Equal(got, []int32{45}) {
		t.Errorf("visibility set to %v, want [45] (the Retry-After)", got)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	for _, tt := range []struct {
		name string
		cfg  sqslambda.Config
		want string
	}{
		{"no client", sqslambda.Config{Handler: h}, "Client is required"},
		{"no handler", sqslambda.Config{Client: newFake()}, "Handler is required"},
		{"negative concurrency", sqslambda.Config{Client: newFake(), Handler: h, Concurrency: -1}, "Concurrency"},
		{"visibility too long", sqslambda.Config{Client: newFake(), Handler: h, Visibility: 13 * time.Hour}, "Visibility"},
	} {
		if _, err := sqslambda.New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New error = %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}
