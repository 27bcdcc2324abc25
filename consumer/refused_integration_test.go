package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// visRecorder records the visibility timeouts asked for each message
// (by message id, through the handle the test maps back).
type visRecorder struct {
	consumer.SQSAPI
	mu   sync.Mutex
	secs map[string][]int32 // receipt handle → visibilities set
}

func (v *visRecorder) record(handle string, secs int32) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.secs == nil {
		v.secs = map[string][]int32{}
	}
	v.secs[handle] = append(v.secs[handle], secs)
}

func (v *visRecorder) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	for _, e := range in.Entries {
		v.record(aws.ToString(e.ReceiptHandle), e.VisibilityTimeout)
	}
	return v.SQSAPI.ChangeMessageVisibilityBatch(ctx, in, o...)
}

func (v *visRecorder) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	v.record(aws.ToString(in.ReceiptHandle), in.VisibilityTimeout)
	return v.SQSAPI.ChangeMessageVisibility(ctx, in, o...)
}

func (v *visRecorder) of(handle string) []int32 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]int32(nil), v.secs[handle]...)
}

// refusedObserver counts refused dead letters.
type refusedObserver struct {
	consumer.NopObserver
	refused atomic.Int64
	mu      sync.Mutex
	handles map[string]string // message id → latest receipt handle
}

func (o *refusedObserver) DeadLetterRefused(*consumer.Message, error) { o.refused.Add(1) }

func (o *refusedObserver) Received(m *consumer.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.handles == nil {
		o.handles = map[string]string{}
	}
	o.handles[m.ID] = aws.ToString(m.Raw.ReceiptHandle)
}

func (o *refusedObserver) handle(id string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.handles[id]
}

// TestDeadLetterShrunkOrRefused (issue 10, defect 5): the dead-letter
// queue's MaximumMessageSize is 1 KiB. A dead letter that only fits once
// sqsonce's reason is truncated and an attribute dropped is delivered; one
// whose body alone is too large is refused: logged at error level, counted,
// and left to the queue's maxReceiveCount with a backoff visibility (not 0,
// not a tight loop). Validate warns about the smaller DLQ limit.
func TestDeadLetterShrunkOrRefused(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(kindName(fifo), func(t *testing.T) {
			t.Parallel()
			client := testenv.SQS(t)
			prefix := testenv.Prefix(t)
			dlqURL, dlqArn := testenv.Queue(t, client, prefix+"-dlq", testenv.QueueOptions{FIFO: fifo,
				Attributes: map[string]string{string(types.QueueAttributeNameMaximumMessageSize): "1024"}})
			queueURL, _ := testenv.Queue(t, client, prefix, testenv.QueueOptions{FIFO: fifo, VisibilityTimeout: 30, DLQArn: dlqArn, MaxReceiveCount: 5})

			send := func(body, group string, attrs map[string]types.MessageAttributeValue) string {
				in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body), MessageAttributes: attrs}
				if fifo {
					in.MessageGroupId = aws.String(group)
					in.MessageDeduplicationId = aws.String(group)
				}
				out, err := client.SendMessage(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				return aws.ToString(out.MessageId)
			}
			fitsBody := strings.Repeat("f", 550)
			send(fitsBody, "g-fits", map[string]types.MessageAttributeValue{
				"tenant":   {DataType: aws.String("String"), StringValue: aws.String("acme")},
				"zz-trace": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("t", 40))},
			})
			bigBody := strings.Repeat("b", 1000)
			bigID := send(bigBody, "g-big", nil)

			core, logs := observer.New(zapcore.InfoLevel)
			obs := &refusedObserver{}
			vr := &visRecorder{SQSAPI: client}
			var mu sync.Mutex
			runs := map[string]int{}
			c, err := consumer.New(consumer.Config{
				Client: vr, QueueURL: queueURL, Logger: zap.New(core), Observer: obs,
				// Full jitter could draw a delay of 0; a refused dead letter
				// must still not come straight back.
				Backoff: consumer.Backoff{Base: 10 * time.Second, RandFunc: func(int64) int64 { return 0 }},
				Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
					mu.Lock()
					runs[m.Body[:1]]++
					mu.Unlock()
					return consumer.Permanent(errors.New("invalid order: " + strings.Repeat("r", 1500)))
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := logs.FilterMessageSnippet("MaximumMessageSize").FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
				t.Errorf("Validate logged %d warnings about the DLQ's MaximumMessageSize, want 1", n)
			}

			stop := runConsumer(t, c)
			got := receiveAll(t, client, dlqURL, 1)[0]
			waitFor(t, 20*time.Second, "the refused dead letter", func() bool {
				return logs.FilterMessageSnippet("refused").FilterLevelExact(zapcore.ErrorLevel).Len() > 0 && len(vr.of(obs.handle(bigID))) > 0
			})
			if err := stop(); err != nil {
				t.Fatal(err)
			}

			if aws.ToString(got.Body) != fitsBody {
				t.Errorf("dead letter body %.20q…, want the original body", aws.ToString(got.Body))
			}
			f := failureOf(t, got)
			if f.Class != consumer.ClassPermanent || !strings.Contains(f.Error, "invalid order: rrr") || len(f.Error) >= 1500 {
				t.Errorf("failure %s %.40q (%d bytes): want class permanent and the reason truncated", f.Class, f.Error, len(f.Error))
			}
			if aws.ToString(got.MessageAttributes[consumer.AttrID].StringValue) == "" {
				t.Errorf("dead letter lost %s", consumer.AttrID)
			}
			if _, ok := got.MessageAttributes["tenant"]; !ok {
				if _, ok := got.MessageAttributes["zz-trace"]; ok {
					t.Errorf("tenant dropped before zz-trace: the rule drops the names that sort last first")
				}
			}
			if size := messageSize(got); size > 1024 {
				t.Errorf("dead letter of %d bytes in a 1024-byte DLQ", size)
			}

			mu.Lock()
			if runs["f"] != 1 {
				t.Errorf("the message that fits ran %d times, want 1", runs["f"])
			}
			if runs["b"] != 1 {
				t.Errorf("the refused message ran %d times, want 1 (no tight loop)", runs["b"])
			}
			mu.Unlock()
			if n := obs.refused.Load(); n != 1 {
				t.Errorf("Observer.DeadLetterRefused called %d times, want 1", n)
			}
			for _, e := range logs.FilterMessageSnippet("refused").FilterLevelExact(zapcore.ErrorLevel).All() {
				if fields := e.ContextMap(); fields["message_id"] != bigID || fields["error"] == nil {
					t.Errorf("refusal logged with %v, want message_id %s and the reason", fields, bigID)
				}
			}
			if secs := vr.of(obs.handle(bigID)); len(secs) == 0 || secs[len(secs)-1] < 10 {
				t.Errorf("refused message's visibility set to %v, want a backoff of at least 10s", secs)
			}
			if out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1}); err != nil || len(out.Messages) != 0 {
				t.Errorf("more dead letters (%v), want none: the refused one must not arrive", err)
			}
			if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 1 {
				t.Errorf("source holds %d visible + %d in flight, want the refused message only", visible, inFlight)
			}
		})
	}
}

func kindName(fifo bool) string {
	if fifo {
		return "fifo"
	}
	return "standard"
}

// messageSize is SQS's size of a message: the body plus each attribute's
// name, data type and value.
func messageSize(m types.Message) int {
	n := len(aws.ToString(m.Body))
	for name, v := range m.MessageAttributes {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}
