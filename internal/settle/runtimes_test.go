package settle_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// The settle table: every outcome × queue type, run through both runtimes
// (the long-poll consumer and the Lambda adapter) on the in-process SQS
// fake, with the same SQS effects asserted for both. See "Errors →
// outcomes" in docs/architecture.md.
//
// Each row sends two messages: m1, which ends as the row says, then m2
// (in the same message group on a FIFO queue), which acks whenever it
// runs. Each runtime then runs until the queue is drained: the consumer
// with Drain, the Lambda adapter invoked as an event source mapping does
// (receive a batch, Handle it, delete the records not reported as
// failures) until two receives in a row come back empty.
//
// The runtimes settle alike but for who deletes: the consumer deletes a
// finished message itself, the Lambda adapter reports it as a success and
// the event source mapping deletes it. Every message the adapter reports
// as a batch item failure also has its visibility set by the adapter, as
// the consumer sets it, so no row differs there; the differs column names
// the one row a runtime cannot express.

// Names of a row's messages (and their dedupe keys): a message's name is
// the first two bytes of its body.
const (
	m1 = "m1"
	m2 = "m2"
)

func nameOf(body string) string { return body[:min(2, len(body))] }

// The retry policy of every row: the delay of a transient failure on the
// first receive is half the ceiling (5s), so that a retry after the
// backoff's delay (5s) and one after its ceiling (10s: a refused dead
// letter) tell apart.
var backoff = consumer.Backoff{Base: 10 * time.Second, RandFunc: func(n int64) int64 { return (n - 1) / 2 }}

const (
	backoffDelay   = 5  // seconds: backoff.Delay(1)
	backoffCeiling = 10 // seconds: backoff.Ceiling(1)
)

// The queues' visibility timeout (2h): long enough that no heartbeat
// extends a message during a row, so every visibility change is a settle.
const queueVisibility = "7200"

// held is how long the cap row's handler runs before it asks for a retry
// 12 hours later. SQS takes at most 12 hours from the receive, 11h50m
// then; the runtimes ask for a minute less (the consumer sends the change
// up to FlushInterval later, and SQS refuses one that ends past the 12
// hours).
const held = 10 * time.Minute

// rowEnv is what a row's handler can reach.
type rowEnv struct {
	f    *sqsfake.Fake
	dlq  string
	fifo bool
	// stop stops the runtime (the consumer's Drain); nil under Lambda.
	stop    context.CancelFunc
	stopped bool
	// m2Ran is closed once m2 has run.
	m2Ran chan struct{}
}

// letter is a dead letter's expected sqsonce-failure.
type letter struct{ class, reason string }

// settleRow is one outcome. Its want columns hold for both runtimes and
// both queue types; differs names the runtimes that cannot express it.
type settleRow struct {
	outcome string
	// Set-up.
	body        string // m1's body; "m1" when empty
	maxAttempts int    // Config.MaxAttempts
	dlqMaxSize  int    // the DLQ's MaximumMessageSize; 0 for SQS's default
	completed   bool   // m1's dedupe key is COMPLETED before it is received
	handle      func(ctx context.Context, e *rowEnv, m *consumer.Message) error

	// What both runtimes do to m1.
	ran        bool    // m1's handler ran (once)
	deleted    bool    // done: the consumer deletes it, Lambda reports it a success
	visibility int32   // when not deleted: the visibility its settle set, seconds
	dead       *letter // its dead letter; nil for none
	// stopsGroup: on a FIFO queue m2 is not run but put back with m1's
	// visibility (a retry's delay, or 0 when m1 is released), so it is
	// left on the queue (the consumer) or reported as a batch item
	// failure (Lambda); it runs once m1 no longer holds the group. On a
	// standard queue, or after m1 is acked or dead-lettered, m2 runs and
	// is deleted.
	stopsGroup bool

	// differs: where a runtime cannot express the row, its name and why;
	// the row does not run there.
	differs map[string]string
}

var settleTable = []settleRow{
	{
		outcome: "ack",
		handle:  func(context.Context, *rowEnv, *consumer.Message) error { return nil },
		ran:     true, deleted: true,
	},
	{
		outcome: "duplicate (ErrDuplicate)",
		handle: func(context.Context, *rowEnv, *consumer.Message) error {
			return fmt.Errorf("charge o7: %w", consumer.ErrDuplicate)
		},
		ran: true, deleted: true,
	},
	{
		outcome: "duplicate (dedupe record completed)", completed: true,
		handle: func(context.Context, *rowEnv, *consumer.Message) error { return errors.New("ran a completed message") },
		ran:    false, deleted: true,
	},
	{
		outcome: "retry with backoff",
		handle:  func(context.Context, *rowEnv, *consumer.Message) error { return errors.New("still failing") },
		ran:     true, visibility: backoffDelay, stopsGroup: true,
	},
	{
		outcome: "retry after",
		handle: func(context.Context, *rowEnv, *consumer.Message) error {
			return consumer.RetryAfter(errors.New("rate limited"), time.Minute)
		},
		ran: true, visibility: 60, stopsGroup: true,
	},
	{
		outcome: "retry after beyond the 12h cap",
		handle: func(context.Context, *rowEnv, *consumer.Message) error {
			time.Sleep(held)
			return consumer.RetryAfter(errors.New("not yet"), 12*time.Hour)
		},
		ran: true, visibility: int32((12*time.Hour - held - time.Minute) / time.Second), stopsGroup: true,
	},
	{
		outcome: "permanent",
		handle: func(context.Context, *rowEnv, *consumer.Message) error {
			return consumer.Permanent(errors.New("bad input"))
		},
		ran: true, deleted: true, dead: &letter{deadletter.ClassPermanent, "bad input"},
	},
	{
		outcome: "max attempts", maxAttempts: 1,
		handle: func(context.Context, *rowEnv, *consumer.Message) error { return errors.New("still failing") },
		ran:    true, deleted: true, dead: &letter{deadletter.ClassMaxAttempts, "max attempts (1): still failing"},
	},
	{
		outcome: "panic",
		handle:  func(context.Context, *rowEnv, *consumer.Message) error { panic("boom") },
		ran:     true, visibility: backoffDelay, stopsGroup: true,
	},
	{
		// SQS refuses the dead letter (larger than the DLQ's
		// MaximumMessageSize): retried after the backoff's ceiling, left to
		// the queue's maxReceiveCount.
		outcome: "dead letter refused", body: m1 + strings.Repeat("x", 2000), dlqMaxSize: 1024,
		handle: func(context.Context, *rowEnv, *consumer.Message) error {
			return consumer.Permanent(errors.New("bad input"))
		},
		ran: true, visibility: backoffCeiling, stopsGroup: true,
	},
	{
		// The DLQ is deleted while the runtime runs (the consumer checks it
		// exists before receiving): retried after the backoff's delay.
		outcome: "dead-letter queue missing",
		handle: func(_ context.Context, e *rowEnv, _ *consumer.Message) error {
			if _, err := e.f.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(e.dlq)}); err != nil {
				return err
			}
			return consumer.Permanent(errors.New("bad input"))
		},
		ran: true, visibility: backoffDelay, stopsGroup: true,
	},
	{
		// The consumer stops while m1 runs; it outlives ShutdownTimeout
		// and is released. On a standard queue m2 runs first.
		outcome: "shutdown release",
		handle: func(ctx context.Context, e *rowEnv, _ *consumer.Message) error {
			if !e.fifo {
				<-e.m2Ran
			}
			e.stopped = true
			e.stop()
			<-ctx.Done()
			return context.Cause(ctx)
		},
		ran: true, visibility: 0, stopsGroup: true,
		differs: map[string]string{
			"lambda": "an invocation has no shutdown: the Lambda service freezes or ends the sandbox between invocations, " +
				"and the nearest thing, the invocation deadline, cancels a running record as a transient failure (a retry with backoff), " +
				"not a release; only records not started by the deadline are released (TestDeadlineCapsTheLease in package sqslambda)",
		},
	},
}

// runtimes are the two ways to run a handler; run runs one until the
// queue is drained and returns the names of the messages it reported as
// batch item failures at their first delivery (nil for the consumer).
var runtimes = []struct {
	name string
	run  func(t *testing.T, r *rig) []string
}{
	{"consumer", runConsumer},
	{"lambda", runLambda},
}

// TestSettleTable: every outcome × queue type has the same SQS effects
// under both runtimes: which messages ran, which are deleted, the
// visibility each settle set, the dead letter and its failure, and the
// messages Lambda reports as batch item failures, which are those the
// consumer leaves on the queue.
func TestSettleTable(t *testing.T) {
	t.Parallel()
	for _, row := range settleTable {
		for _, fifo := range []bool{false, true} {
			kind := "standard"
			if fifo {
				kind = "fifo"
			}
			t.Run(row.outcome+"/"+kind, func(t *testing.T) {
				t.Parallel()
				for _, rt := range runtimes {
					t.Run(rt.name, func(t *testing.T) {
						if why, ok := row.differs[rt.name]; ok {
							t.Skip("not expressible: " + why)
						}
						t.Parallel()
						synctest.Test(t, func(t *testing.T) { runRow(t, row, fifo, rt.name == "lambda", rt.run) })
					})
				}
			})
		}
	}
}

// rig is one run: a queue and its DLQ on a new fake, and the handler
// settings common to both runtimes.
type rig struct {
	f             *sqsfake.Fake
	url, arn, dlq string
	env           *rowEnv
	handler       consumer.Handler
	store         *dedupe.Memory
	maxAttempts   int
	key           consumer.KeyFunc
	log           *zap.Logger
}

// newRig makes a queue "orders" (orders.fifo when fifo) and its DLQ,
// with dlqAttrs, on a new fake.
func newRig(fifo bool, dlqAttrs map[string]string) *rig {
	f := sqsfake.New()
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	dlq := f.AddQueue("orders-dlq"+suffix, dlqAttrs)
	url := f.AddQueue("orders"+suffix, map[string]string{
		"VisibilityTimeout": queueVisibility,
		"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq` + suffix + `","maxReceiveCount":"100"}`,
	})
	return &rig{
		f: f, url: url, dlq: dlq, arn: "arn:aws:sqs:us-east-1:123456789012:orders" + suffix,
		env:   &rowEnv{f: f, dlq: dlq, fifo: fifo, m2Ran: make(chan struct{})},
		store: dedupe.NewMemory(dedupe.MemoryConfig{}),
		key:   byBody,
		log:   zap.NewNop(),
	}
}

func runRow(t *testing.T, row settleRow, fifo, lambda bool, run func(*testing.T, *rig) []string) {
	var dlqAttrs map[string]string
	if row.dlqMaxSize > 0 {
		dlqAttrs = map[string]string{"MaximumMessageSize": fmt.Sprint(row.dlqMaxSize)}
	}
	r := newRig(fifo, dlqAttrs)
	body1 := cmp.Or(row.body, m1)
	id1 := r.f.Put(r.url, body1, "g")
	r.f.Put(r.url, m2, "g")
	if row.completed {
		c, err := r.store.Claim(context.Background(), m1, dedupe.Fingerprint(body1), time.Minute)
		if err == nil {
			err = r.store.Complete(context.Background(), m1, c.Token)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	runs := map[string]int{}
	var once sync.Once
	r.handler = consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		name := nameOf(m.Body)
		mu.Lock()
		runs[name]++
		mu.Unlock()
		if name == m2 {
			once.Do(func() { close(r.env.m2Ran) })
			return nil
		}
		return row.handle(ctx, r.env, m)
	})
	r.maxAttempts = row.maxAttempts

	reported := run(t, r)

	// What is expected of m1 and m2.
	wantRuns := map[string]int{m1: 0, m2: 1}
	if row.ran {
		wantRuns[m1] = 1
	}
	wantVis := map[string][]int32{}
	wantLeft := map[string]bool{m1: !row.deleted}
	var wantFailures []string
	if !row.deleted {
		wantVis[m1] = []int32{row.visibility}
		wantFailures = append(wantFailures, m1)
	}
	if fifo && row.stopsGroup {
		// m2 is put back without running, with m1's visibility: the group
		// comes back together, m1 first.
		wantVis[m2] = []int32{row.visibility}
		wantFailures = append(wantFailures, m2)
		wantRuns[m2] = 0
		wantLeft[m2] = true
	}

	// What the runtime did, as SQS saw it.
	mu.Lock()
	gotRuns := runs
	mu.Unlock()
	names := map[string]string{} // MessageId → name
	for _, s := range r.f.Sent(r.url) {
		names[s.MessageID] = nameOf(s.Body)
	}
	gotLeft := map[string]bool{}
	for _, m := range r.f.Messages(r.url) {
		gotLeft[nameOf(m.Body)] = true
	}
	gotVis := map[string][]int32{}
	for _, v := range r.f.VisibilityLog() {
		if v.Err != "" {
			t.Errorf("SQS refused a visibility change of %s to %ds: %s", names[v.MessageID], v.Seconds, v.Err)
			continue
		}
		gotVis[names[v.MessageID]] = append(gotVis[names[v.MessageID]], v.Seconds)
	}
	// Left on the queue by its first settle: a visibility change comes
	// first (a deleted message has no later settle).
	var gotFailures []string
	for _, n := range []string{m1, m2} {
		if len(gotVis[n]) > 0 {
			gotFailures = append(gotFailures, n)
		}
	}

	for _, n := range []string{m1, m2} {
		if gotRuns[n] != wantRuns[n] {
			t.Errorf("%s ran %d times, want %d", n, gotRuns[n], wantRuns[n])
		}
		if gotLeft[n] != wantLeft[n] {
			t.Errorf("%s left on the queue: %v, want %v (deleted: %v)", n, gotLeft[n], wantLeft[n], !wantLeft[n])
		}
		if !slices.Equal(gotVis[n], wantVis[n]) {
			t.Errorf("%s's visibility set to %v (seconds, in order), want %v", n, gotVis[n], wantVis[n])
		}
	}
	if !slices.Equal(gotFailures, wantFailures) {
		t.Errorf("kept on the queue by their first settle (a visibility change): %v, want %v", gotFailures, wantFailures)
	}
	if lambda && !slices.Equal(reported, wantFailures) {
		t.Errorf("batchItemFailures (at each message's first delivery): %v, want %v", reported, wantFailures)
	}

	sent := r.f.Sent(r.dlq) // nil once the DLQ is deleted
	switch {
	case row.dead == nil && len(sent) > 0:
		t.Errorf("%d dead letters, want none", len(sent))
	case row.dead != nil && len(sent) != 1:
		t.Errorf("%d dead letters, want 1", len(sent))
	case row.dead != nil:
		d := sent[0]
		f, ok := deadletter.ParseFailure(d.Attributes)
		if !ok {
			t.Fatalf("dead letter without a valid %s attribute: %v", deadletter.AttrFailure, d.Attributes)
		}
		if d.Body != body1 || f.Class != row.dead.class || f.Error != row.dead.reason || f.Attempts != 1 ||
			f.SourceQueue != r.url || f.OriginalMessageID != id1 {
			t.Errorf("dead letter %q with failure %+v, want body %q, class %q, error %q, 1 attempt, source %s, original id %s",
				d.Body, f, body1, row.dead.class, row.dead.reason, r.url, id1)
		}
		if fifo && (d.GroupID != "g" || d.DeduplicationID != id1) {
			t.Errorf("FIFO dead letter in group %q with deduplication id %q, want g and %s", d.GroupID, d.DeduplicationID, id1)
		}
	}
	for _, p := range r.f.Problems() {
		t.Errorf("SQS contract violation: %s", p)
	}
}

// wrapDedupe is the dedupe middleware over store.
func wrapDedupe(t *testing.T, store dedupe.Store) consumer.Middleware {
	t.Helper()
	dd, err := dedupe.New(dedupe.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return dd.Wrap
}

// byBody keys each message by its name.
func byBody(m *consumer.Message) string { return nameOf(m.Body) }

// runConsumer drains the queue with a consumer.
func runConsumer(t *testing.T, r *rig) []string {
	t.Helper()
	c, err := consumer.New(consumer.Config{
		Client: r.f, QueueURL: r.url, Handler: r.handler,
		Middleware:  []consumer.Middleware{wrapDedupe(t, r.store)},
		KeyFunc:     r.key,
		Backoff:     backoff,
		MaxAttempts: r.maxAttempts,
		WaitTime:    time.Second,
		Logger:      r.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.env.stop = cancel
	err = c.Drain(ctx)
	if r.env.stopped {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Drain stopped while a handler ran = %v, want the shutdown timeout's error", err)
		}
	} else if err != nil {
		t.Errorf("Drain = %v", err)
	}
	return nil
}

// runLambda invokes a Lambda adapter as an event source mapping does
// until two receives in a row come back empty, and returns the names of
// the messages reported as batch item failures at their first delivery.
func runLambda(t *testing.T, r *rig) []string {
	t.Helper()
	h, err := sqslambda.New(sqslambda.Config{
		Client: r.f, Handler: r.handler,
		Middleware:  []consumer.Middleware{wrapDedupe(t, r.store)},
		KeyFunc:     r.key,
		Backoff:     backoff,
		MaxAttempts: r.maxAttempts,
		Logger:      r.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seen := map[string]bool{}
	var failures []string
	for empties := 0; empties < 2; {
		out, err := r.f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(r.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			empties++
			continue
		}
		empties = 0
		ictx, cancel := context.WithTimeout(ctx, 15*time.Minute) // the function's timeout
		resp, err := h.Handle(ictx, event(r.arn, out.Messages))
		cancel()
		if err != nil {
			t.Fatalf("Handle: %v", err)
		}
		failed := map[string]bool{}
		for _, x := range resp.BatchItemFailures {
			failed[x.ItemIdentifier] = true
		}
		for _, m := range out.Messages {
			name := nameOf(aws.ToString(m.Body))
			if !seen[name] {
				seen[name] = true
				if failed[aws.ToString(m.MessageId)] {
					failures = append(failures, name)
				}
			}
			if failed[aws.ToString(m.MessageId)] {
				continue
			}
			if _, err := r.f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete %s: %v", name, err)
			}
		}
	}
	slices.Sort(failures)
	return failures
}

// event is the event an event source mapping makes of received messages.
func event(arn string, msgs []types.Message) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		rec := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes,
			EventSourceARN: arn, EventSource: "aws:sqs", AWSRegion: "us-east-1",
		}
		for name, v := range m.MessageAttributes {
			if rec.MessageAttributes == nil {
				rec.MessageAttributes = map[string]events.SQSMessageAttribute{}
			}
			rec.MessageAttributes[name] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

// TestReasonsGolden: both runtimes record the handler's error text as the
// reason, not "permanent: ..." under class permanent (issue 16), in the
// dead letter's sqsonce-failure and in the settled log line, as
// testdata/reasons.golden holds.
func TestReasonsGolden(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("testdata/reasons.golden")
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{"permanent", "permanent-in-context", "retry", "max-attempts"}
	handler := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		switch m.Body {
		case "permanent":
			return consumer.Permanent(fmt.Errorf("charge o7: %w", errors.New("422 Unprocessable Entity")))
		case "permanent-in-context":
			return fmt.Errorf("order o8: %w", consumer.Permanent(errors.New("card declined")))
		case "retry":
			return consumer.RetryAfter(errors.New("rate limited"), time.Minute)
		}
		return errors.New("still failing")
	})
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newRig(false, nil)
				for _, b := range bodies {
					r.f.Put(r.url, b, "")
				}
				core, logs := observer.New(zapcore.DebugLevel)
				r.log = zap.New(core)
				r.handler = handler
				r.maxAttempts = 1
				r.key = func(m *consumer.Message) string { return m.Body }
				rt.run(t, r)
				if got := reasonsReport(t, r, logs); got != string(want) {
					t.Errorf("reasons:\n%s\nwant (testdata/reasons.golden):\n%s", got, want)
				}
			})
		})
	}
}

// reasonsReport renders, per message, its dead letter's recorded failure
// and its settled log line (message "settled", one per settled message at
// debug level), sorted. Messages are keyed by their whole body.
func reasonsReport(t *testing.T, r *rig, logs *observer.ObservedLogs) string {
	t.Helper()
	var lines []string
	for _, s := range r.f.Sent(r.dlq) {
		f, ok := deadletter.ParseFailure(s.Attributes)
		if !ok {
			t.Fatalf("dead letter %q without a failure attribute", s.Body)
		}
		lines = append(lines, fmt.Sprintf("%s dead letter: class=%s attempts=%d error=%q", s.Body, f.Class, f.Attempts, f.Error))
	}
	for _, e := range logs.FilterMessage("settled").All() {
		fields := e.ContextMap()
		class, _ := fields["class"].(string)
		lines = append(lines, fmt.Sprintf("%s settled: outcome=%s class=%s error=%q", fields["key"], fields["outcome"], class, fields["error"]))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}
