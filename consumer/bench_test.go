package consumer_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/delivery"
)

// benchSQS hands out n pre-built messages as fast as they are asked for
// and counts deletes; no network, no visibility bookkeeping. On FIFO it
// tags messages with one of groups group ids (several of a group may come
// in one receive, as on real SQS).
type benchSQS struct {
	consumer.SQSAPI // nil: calls the consumer does not make here panic
	url             string
	fifo            bool

	mu   sync.Mutex
	msgs []types.Message
	next int

	deleted atomic.Int64
	total   int64
	done    chan struct{}
	once    sync.Once
}

func newBenchSQS(n int, groups int) *benchSQS {
	f := &benchSQS{url: "https://sqs.test/123456789012/bench", fifo: groups > 0, total: int64(n), done: make(chan struct{})}
	if f.fifo {
		f.url += ".fifo"
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	f.msgs = make([]types.Message, n)
	for i := range f.msgs {
		id := strconv.Itoa(i)
		attrs := map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": now}
		if f.fifo {
			attrs["MessageGroupId"] = "g" + strconv.Itoa(i%groups)
		}
		f.msgs[i] = types.Message{MessageId: aws.String("m-" + id), ReceiptHandle: aws.String("h-" + id), Body: aws.String("{}"), Attributes: attrs}
	}
	return f
}

func (f *benchSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"VisibilityTimeout": "30", "FifoQueue": strconv.FormatBool(f.fifo)}}, nil
}

func (f *benchSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	n := min(int(in.MaxNumberOfMessages), len(f.msgs)-f.next)
	out := f.msgs[f.next : f.next+n : f.next+n]
	f.next += n
	f.mu.Unlock()
	if n == 0 {
		<-ctx.Done() // a long poll on an empty queue
		return nil, ctx.Err()
	}
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (f *benchSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	ok := make([]types.DeleteMessageBatchResultEntry, len(in.Entries))
	for i, e := range in.Entries {
		ok[i].Id = e.Id
	}
	if f.deleted.Add(int64(len(in.Entries))) >= f.total {
		f.once.Do(func() { close(f.done) })
	}
	return &sqs.DeleteMessageBatchOutput{Successful: ok}, nil
}

func (f *benchSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	ok := make([]types.ChangeMessageVisibilityBatchResultEntry, len(in.Entries))
	for i, e := range in.Entries {
		ok[i].Id = e.Id
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{Successful: ok}, nil
}

// benchRun drains b.N messages through a consumer with a no-op handler:
// receive, dispatch, pipeline, settle. One op is one message.
func benchRun(b *testing.B, groups int) {
	f := newBenchSQS(b.N, groups)
	c, err := consumer.New(consumer.Config{
		Client: f, QueueURL: f.url, DeadLetterQueueURL: f.url, Concurrency: 32,
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { errc <- c.Run(ctx) }()
	<-f.done
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkDispatchStandard: the consumer's own cost per message on a
// standard queue (Concurrency 32, no-op handler, in-process SQS).
func BenchmarkDispatchStandard(b *testing.B) { benchRun(b, 0) }

// BenchmarkDispatchFIFO: the same through FIFO lanes, 100 groups.
func BenchmarkDispatchFIFO(b *testing.B) { benchRun(b, 100) }

// BenchmarkPipelineProcess: the per-message path (key, panic recovery,
// the default classifier) per handler result.
func BenchmarkPipelineProcess(b *testing.B) {
	msg := delivery.New(types.Message{
		MessageId: aws.String("m-1"), ReceiptHandle: aws.String("h-1"), Body: aws.String("{}"),
		Attributes: map[string]string{"ApproximateReceiveCount": "2"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String("order-1")},
		},
	}, "https://sqs.test/123456789012/q", time.Now())
	transient := errors.New("transient")
	for _, tc := range []struct {
		name string
		err  error
		want consumer.Outcome
	}{
		{"ack", nil, consumer.OutcomeAck},
		{"duplicate", consumer.ErrDuplicate, consumer.OutcomeDuplicate},
		{"retry_backoff", transient, consumer.OutcomeRetry},
		{"retry_after", consumer.RetryAfter(transient, time.Second), consumer.OutcomeRetry},
		{"permanent", consumer.Permanent(transient), consumer.OutcomeDeadLetter},
	} {
		b.Run(tc.name, func(b *testing.B) {
			process := consumer.NewProcess(consumer.Config{Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return tc.err })})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := process(ctx, msg); res.Outcome != tc.want {
					b.Fatalf("outcome %s, want %s", res.Outcome, tc.want)
				}
			}
		})
	}
}
