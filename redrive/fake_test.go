package redrive_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/redrive"
)

// fakeSQS is an in-memory standard-queue SQS for unit tests; calls it does
// not implement panic through the nil embedded interface.
type fakeSQS struct {
	redrive.SQSAPI
	mu     sync.Mutex
	queues map[string]*fakeQueue
	seq    int
	sends  []time.Time // when each SendMessageBatch ran
}

type fakeQueue struct {
	msgs []*fakeMsg
}

type fakeMsg struct {
	id, body, handle string
	attrs            map[string]types.MessageAttributeValue
	visibleAt        time.Time
	receives         int
}

func newFake(names ...string) *fakeSQS {
	f := &fakeSQS{queues: map[string]*fakeQueue{}}
	for _, n := range names {
		f.queues["http://fake/"+n] = &fakeQueue{}
	}
	return f
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	u := "http://fake/" + aws.ToString(in.QueueName)
	if f.queues[u] == nil {
		return nil, &types.QueueDoesNotExist{}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(u)}, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[aws.ToString(in.QueueUrl)]
	if q == nil {
		return nil, &types.QueueDoesNotExist{}
	}
	vis, inflight := 0, 0
	for _, m := range q.msgs {
		if m.visibleAt.After(time.Now()) {
			inflight++
		} else {
			vis++
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"QueueArn":                              "arn:aws:sqs:x:0:" + aws.ToString(in.QueueUrl)[12:],
		"ApproximateNumberOfMessages":           strconv.Itoa(vis),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inflight),
	}}, nil
}

func (f *fakeSQS) put(url string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range n {
		f.seq++
		f.queues[url].msgs = append(f.queues[url].msgs, &fakeMsg{id: fmt.Sprintf("m%d", f.seq), body: fmt.Sprintf("b%d", i), attrs: map[string]types.MessageAttributeValue{}})
	}
}

func (f *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	q := f.queues[aws.ToString(in.QueueUrl)]
	var out []types.Message
	now := time.Now()
	for _, m := range q.msgs {
		if len(out) == int(in.MaxNumberOfMessages) {
			break
		}
		if m.visibleAt.After(now) {
			continue
		}
		f.seq++
		m.handle = fmt.Sprintf("h%d", f.seq)
		m.receives++
		m.visibleAt = now.Add(time.Duration(in.VisibilityTimeout) * time.Second)
		out = append(out, types.Message{MessageId: aws.String(m.id), Body: aws.String(m.body), ReceiptHandle: aws.String(m.handle),
			MessageAttributes: m.attrs, Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(now.UnixMilli(), 10), "ApproximateReceiveCount": strconv.Itoa(m.receives)}})
	}
	f.mu.Unlock()
	if len(out) == 0 && in.WaitTimeSeconds > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(in.WaitTimeSeconds) * time.Second):
		}
	}
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends = append(f.sends, time.Now())
	q := f.queues[aws.ToString(in.QueueUrl)]
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		f.seq++
		q.msgs = append(q.msgs, &fakeMsg{id: fmt.Sprintf("m%d", f.seq), body: aws.ToString(e.MessageBody), attrs: e.MessageAttributes})
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[aws.ToString(in.QueueUrl)]
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		for i, m := range q.msgs {
			if m.handle == aws.ToString(e.ReceiptHandle) {
				q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
				break
			}
		}
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[aws.ToString(in.QueueUrl)]
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		for _, m := range q.msgs {
			if m.handle == aws.ToString(e.ReceiptHandle) {
				m.visibleAt = time.Now().Add(time.Duration(e.VisibilityTimeout) * time.Second)
			}
		}
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// TestPacing checks the rate limiter on a fake clock: 50 messages at 10/s
// take 5 s, sent in batches of 10 one second apart.
func TestPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake("dlq", "src")
		f.put("http://fake/dlq", 50)
		r, err := redrive.New(redrive.Config{Client: f})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		dlq, _ := r.Queue(ctx, "dlq")
		start := time.Now()
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src", Rate: 10})
		if err != nil || sum.Moved != 50 {
			t.Fatalf("%+v %v", sum, err)
		}
		if len(f.sends) != 5 {
			t.Fatalf("%d sends, want 5 batches of 10", len(f.sends))
		}
		for i, at := range f.sends {
			if want := time.Duration(i+1) * time.Second; at.Sub(start) != want {
				t.Fatalf("batch %d sent at %s, want %s", i, at.Sub(start), want)
			}
		}
		// A fractional rate sends one message at a time.
		f.put("http://fake/dlq", 3)
		f.sends = nil
		start = time.Now()
		if sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src", Rate: 0.5}); err != nil || sum.Moved != 3 {
			t.Fatalf("%+v %v", sum, err)
		}
		if len(f.sends) != 3 || f.sends[2].Sub(start) != 6*time.Second {
			t.Fatalf("sends at %v", f.sends)
		}
	})
}

// TestHeldMessagesStayHidden checks that messages held back during a long
// move are extended, not handed out again, and visible at the end.
func TestHeldMessagesStayHidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake("dlq", "src")
		f.put("http://fake/dlq", 40)
		for i, m := range f.queues["http://fake/dlq"].msgs {
			if i%2 == 0 {
				m.attrs["keep"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("1")}
			}
		}
		r, _ := redrive.New(redrive.Config{Client: f, VisibilityTimeout: 3 * time.Second})
		ctx := context.Background()
		dlq, _ := r.Queue(ctx, "dlq")
		flt, _ := redrive.ParseFilters("attr:keep")
		// 1 message per second: 20 s, far past the 3 s visibility timeout.
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src", Filters: flt, Rate: 1})
		if err != nil || sum.Moved != 20 || sum.Skipped != 20 || sum.Received != 40 {
			t.Fatalf("%+v %v", sum, err)
		}
		for _, m := range f.queues["http://fake/dlq"].msgs {
			if m.visibleAt.After(time.Now()) {
				t.Fatal("a held message is still hidden after the move")
			}
			if m.receives != 1 {
				t.Fatalf("held message %s was received %d times: its visibility was not extended", m.id, m.receives)
			}
		}
		if n := len(f.queues["http://fake/src"].msgs); n != 20 {
			t.Fatalf("source has %d", n)
		}
	})
}

// A message dead-lettered again after this run moved it (a consumer that
// still fails) is left in the DLQ rather than moved around in a loop.
func TestCameBackIsNotMovedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake("dlq", "src")
		f.put("http://fake/dlq", 2)
		r, _ := redrive.New(redrive.Config{Client: f})
		ctx := context.Background()
		dlq, _ := r.Queue(ctx, "dlq")
		// A "consumer" fails every moved message straight back to the DLQ.
		back := &bouncer{fakeSQS: f}
		r, _ = redrive.New(redrive.Config{Client: back})
		sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src"})
		if err != nil || sum.Moved != 2 || sum.Skipped != 2 || len(f.queues["http://fake/dlq"].msgs) != 2 {
			t.Fatalf("%+v %v", sum, err)
		}
	})
}

// bouncer sends every message sent to src on to dlq, as a failing
// consumer would (attributes kept).
type bouncer struct{ *fakeSQS }

func (b *bouncer) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := b.fakeSQS.SendMessageBatch(ctx, in, o...)
	if err == nil && aws.ToString(in.QueueUrl) == "http://fake/src" {
		_, err = b.fakeSQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://fake/dlq"), Entries: in.Entries}, o...)
	}
	return out, err
}
