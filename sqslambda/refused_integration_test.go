package sqslambda_test

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
	"github.com/sqsonce/sqsonce/sqslambda"
)

// visClient records the visibility set on each receipt handle.
type visClient struct {
	sqslambda.SQSAPI
	mu   sync.Mutex
	secs map[string][]int32
}

func (c *visClient) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	c.mu.Lock()
	if c.secs == nil {
		c.secs = map[string][]int32{}
	}
	c.secs[aws.ToString(in.ReceiptHandle)] = append(c.secs[aws.ToString(in.ReceiptHandle)], in.VisibilityTimeout)
	c.mu.Unlock()
	return c.SQSAPI.ChangeMessageVisibility(ctx, in, o...)
}

func (c *visClient) of(handle string) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int32(nil), c.secs[handle]...)
}

type refusedObserver struct {
	consumer.NopObserver
	refused atomic.Int64
}

func (o *refusedObserver) DeadLetterRefused(*consumer.Message, error) { o.refused.Add(1) }

// TestIntegrationDeadLetterShrunkOrRefused (issue 10, defect 5): the DLQ's
// MaximumMessageSize is 1 KiB. A dead letter that fits once the reason is
// cut and an attribute dropped is sent and its record succeeds; one whose
// body alone is too large is refused: reported as a failure with a backoff
// visibility (not 0), logged at error level and counted. Check warns about
// the smaller DLQ limit at start-up.
func TestIntegrationDeadLetterShrunkOrRefused(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		name := "standard"
		if fifo {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			client := testenv.SQS(t)
			prefix := testenv.Prefix(t)
			dlqURL, dlqArn := testenv.Queue(t, client, prefix+"-dlq", testenv.QueueOptions{FIFO: fifo,
				Attributes: map[string]string{string(types.QueueAttributeNameMaximumMessageSize): "1024"}})
			url, arn := testenv.Queue(t, client, prefix, testenv.QueueOptions{FIFO: fifo, VisibilityTimeout: 120, DLQArn: dlqArn, MaxReceiveCount: 5})
			sendOne := func(body, group string, attrs map[string]types.MessageAttributeValue) {
				in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageAttributes: attrs}
				if fifo {
					in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(group)
				}
				send(t, client, in)
			}
			fitsBody := strings.Repeat("f", 550)
			sendOne(fitsBody, "g-fits", map[string]types.MessageAttributeValue{
				"tenant":   {DataType: aws.String("String"), StringValue: aws.String("acme")},
				"zz-trace": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("t", 40))},
			})
			sendOne(strings.Repeat("b", 1000), "g-big", nil)

			core, logs := observer.New(zapcore.InfoLevel)
			obs := &refusedObserver{}
			vc := &visClient{SQSAPI: client}
			a, err := sqslambda.New(sqslambda.Config{
				Client: vc, QueueURL: url, FunctionTimeout: 10 * time.Second,
				Logger: zap.New(core), Observer: obs,
				Backoff: consumer.Backoff{Base: 10 * time.Second, RandFunc: func(int64) int64 { return 0 }},
				Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
					return consumer.Permanent(errors.New("invalid order: " + strings.Repeat("r", 1500)))
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			_ = a.Check(context.Background())
			if n := logs.FilterMessageSnippet("MaximumMessageSize").FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
				t.Errorf("Check logged %d warnings about the DLQ's MaximumMessageSize, want 1", n)
			}

			// fauxqs returns one message per FIFO group per receive: both
			// groups come in one batch.
			resp, msgs := invoke(t, a, client, url, arn, 2)
			bigID := idOf(msgs, strings.Repeat("b", 1000))
			if got := failures(resp); got != bigID {
				t.Errorf("batchItemFailures = %q, want the refused message %q only", got, bigID)
			}
			dead := receive(t, client, dlqURL, 1)[0]
			if aws.ToString(dead.Body) != fitsBody {
				t.Errorf("dead letter body %.20q…, want the one that fits", aws.ToString(dead.Body))
			}
			var handle string
			for _, m := range msgs {
				if aws.ToString(m.MessageId) == bigID {
					handle = aws.ToString(m.ReceiptHandle)
				}
			}
			if secs := vc.of(handle); len(secs) != 1 || secs[0] < 10 {
				t.Errorf("refused record's visibility set to %v, want one backoff of at least 10s", secs)
			}
			if n := obs.refused.Load(); n != 1 {
				t.Errorf("Observer.DeadLetterRefused called %d times, want 1", n)
			}
			if n := logs.FilterMessageSnippet("refused").FilterLevelExact(zapcore.ErrorLevel).FilterField(zap.String("message_id", bigID)).Len(); n != 1 {
				t.Errorf("%d error lines about the refusal with its message_id, want 1", n)
			}
			if visible, inFlight := testenv.Count(t, client, url); visible != 0 || inFlight != 1 {
				t.Errorf("source: %d visible, %d in flight; want the refused message in flight for its backoff", visible, inFlight)
			}
		})
	}
}
