package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// ceiling makes full jitter pick the top of its range, so retry delays are
// 1s, 2s, 4s... and tests can check them.
func ceiling(n int64) int64 { return n - 1 }

// receiveAll reads n messages from queueURL (deleting them) or fails.
func receiveAll(t *testing.T, client *sqs.Client, queueURL string, n int) []types.Message {
	t.Helper()
	return testenv.Receive(t, client, queueURL, n, true)
}

func failureOf(t *testing.T, m types.Message) deadletter.Failure {
	t.Helper()
	v, ok := m.MessageAttributes[deadletter.AttrFailure]
	if !ok {
		t.Fatalf("dead letter has no %s attribute: %v", deadletter.AttrFailure, m.MessageAttributes)
	}
	var f deadletter.Failure
	if err := json.Unmarshal([]byte(aws.ToString(v.StringValue)), &f); err != nil {
		t.Fatalf("%s is not JSON: %v", deadletter.AttrFailure, err)
	}
	return f
}

func sendOne(t *testing.T, client *sqs.Client, queueURL, body string, attrs map[string]types.MessageAttributeValue) string {
	t.Helper()
	out, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body), MessageAttributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

func TestPermanentGoesToDLQAtOnce(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, dlqURL := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 10})
	id := sendOne(t, client, queueURL, `{"order":1}`, map[string]types.MessageAttributeValue{
		"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
		"n":      {DataType: aws.String("Number"), StringValue: aws.String("42")},
	})
	var runs atomic.Int64
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			runs.Add(1)
			return consumer.Permanent(errors.New("bad input: no customer"))
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	got := receiveAll(t, client, dlqURL, 1)[0]
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", runs.Load())
	}
	if aws.ToString(got.Body) != `{"order":1}` {
		t.Errorf("dead letter body %q", aws.ToString(got.Body))
	}
	if v := got.MessageAttributes["tenant"]; aws.ToString(v.StringValue) != "acme" || aws.ToString(v.DataType) != "String" {
		t.Errorf("tenant attribute %+v", v)
	}
	if v := got.MessageAttributes["n"]; aws.ToString(v.StringValue) != "42" || aws.ToString(v.DataType) != "Number" {
		t.Errorf("n attribute %+v", v)
	}
	if v := got.MessageAttributes[consumer.AttrID]; aws.ToString(v.StringValue) != id {
		t.Errorf("%s = %q, want the MessageId %s", consumer.AttrID, aws.ToString(v.StringValue), id)
	}
	f := failureOf(t, got)
	if f.Class != consumer.ClassPermanent || !strings.Contains(f.Error, "bad input: no customer") || f.Attempts != 1 ||
		f.SourceQueue != queueURL || f.OriginalMessageID != id || f.FailedAt.IsZero() {
		t.Errorf("failure %+v", f)
	}
	if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 0 {
		t.Errorf("source still holds %d visible + %d in flight", visible, inFlight)
	}
}

func TestTransientRetriedWithIncreasingDelay(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, dlqURL := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 10})
	sendOne(t, client, queueURL, "x", nil)
	var mu sync.Mutex
	var at []time.Time
	var counts []int
	var delays []time.Duration
	obs := &recordingObserver{onSettled: func(m *consumer.Message, r consumer.Result) {
		if r.Outcome == consumer.OutcomeRetry {
			mu.Lock()
			delays = append(delays, r.Delay)
			mu.Unlock()
		}
	}}
	done := make(chan struct{})
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, Observer: obs,
		Backoff: consumer.Backoff{Base: time.Second, Cap: time.Minute, RandFunc: ceiling},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			counts = append(counts, m.ReceiveCount)
			if len(at) <= 3 {
				return errors.New("database unavailable")
			}
			close(done)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("message not handled within 30s")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	if len(delays) != 3 || delays[0] != want[0] || delays[1] != want[1] || delays[2] != want[2] {
		t.Errorf("retry delays %v, want %v", delays, want)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < want[i-1]-100*time.Millisecond {
			t.Errorf("attempt %d came %s after attempt %d, before its %s delay", i+1, gap, i, want[i-1])
		}
		if counts[i] != counts[i-1]+1 {
			t.Errorf("receive counts %v, want consecutive", counts)
		}
	}
	if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 0 {
		t.Errorf("source still holds %d visible + %d in flight", visible, inFlight)
	}
	if visible, _ := testenv.Count(t, client, dlqURL); visible != 0 {
		t.Errorf("DLQ holds %d messages", visible)
	}
}

func TestMaxAttemptsDeadLetters(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, dlqURL := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 10})
	id := sendOne(t, client, queueURL, "x", map[string]types.MessageAttributeValue{
		consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String("job-7")},
	})
	var runs atomic.Int64
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, MaxAttempts: 3,
		Backoff: consumer.Backoff{Base: 100 * time.Millisecond, Cap: 100 * time.Millisecond, RandFunc: ceiling},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			runs.Add(1)
			return errors.New("still failing")
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	got := receiveAll(t, client, dlqURL, 1)[0]
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 3 {
		t.Errorf("handler ran %d times, want 3", runs.Load())
	}
	f := failureOf(t, got)
	if f.Class != consumer.ClassMaxAttempts || !strings.Contains(f.Error, "max attempts") || !strings.Contains(f.Error, "still failing") || f.Attempts != 3 || f.OriginalMessageID != id {
		t.Errorf("failure %+v", f)
	}
	if v := got.MessageAttributes[consumer.AttrID]; aws.ToString(v.StringValue) != "job-7" {
		t.Errorf("%s = %q, want job-7 kept", consumer.AttrID, aws.ToString(v.StringValue))
	}
}

func TestMalformedBodyDeadLetteredWorkerContinues(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, dlqURL := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 10})
	bodies := []string{`{"n":1}`, `{"n":2}`, `{"n":`, `{"n":4}`, `{"n":5}`}
	for _, b := range bodies {
		sendOne(t, client, queueURL, b, nil)
	}
	var ok atomic.Int64
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, Concurrency: 1,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			var v struct{ N int }
			if err := json.Unmarshal([]byte(m.Body), &v); err != nil {
				return consumer.Permanent(err)
			}
			ok.Add(1)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	got := receiveAll(t, client, dlqURL, 1)[0]
	waitFor(t, 30*time.Second, "the well-formed messages", func() bool { return ok.Load() == 4 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if aws.ToString(got.Body) != `{"n":` {
		t.Errorf("dead letter body %q", aws.ToString(got.Body))
	}
	if f := failureOf(t, got); f.Class != consumer.ClassPermanent || !strings.Contains(f.Error, "unexpected end of JSON input") {
		t.Errorf("failure %+v", f)
	}
	if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 0 {
		t.Errorf("source still holds %d visible + %d in flight", visible, inFlight)
	}
}

func TestPanicIsAFailureConsumerLives(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 10})
	sendOne(t, client, queueURL, "boom", nil)
	var mu sync.Mutex
	runs := map[string]int{}
	var classes []string
	obs := &recordingObserver{onSettled: func(m *consumer.Message, r consumer.Result) {
		mu.Lock()
		classes = append(classes, r.Outcome.String()+"/"+r.Class)
		mu.Unlock()
	}}
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, Observer: obs,
		Backoff: consumer.Backoff{Base: 100 * time.Millisecond, RandFunc: ceiling},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			runs[m.Body]++
			n := runs[m.Body]
			mu.Unlock()
			if m.Body == "boom" && n == 1 {
				var p *struct{ x int }
				_ = p.x // nil dereference
			}
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	waitFor(t, 30*time.Second, "the panicking message to be retried", func() bool { mu.Lock(); defer mu.Unlock(); return runs["boom"] == 2 })
	sendOne(t, client, queueURL, "after", nil)
	waitFor(t, 30*time.Second, "a later message", func() bool { mu.Lock(); defer mu.Unlock(); return runs["after"] == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(classes) != 3 || classes[0] != "retry/panic" || classes[1] != "ack/" || classes[2] != "ack/" {
		t.Errorf("settled %v, want [retry/panic ack/ ack/]", classes)
	}
}
