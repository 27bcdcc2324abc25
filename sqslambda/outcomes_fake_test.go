package sqslambda_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// ExampleHandler_Handle's scenario on the full SQS fake, its queues named
// by a RedrivePolicy: of a batch of three, the ack and the dead letter
// are reported as successes; the one to retry in a minute is the only
// batch item failure and stays in the queue, invisible for a minute; the
// permanent failure is in the dead-letter queue.
func TestHandleOutcomesOnFakeQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, url, arn, dlq := fakeQueues(false, nil, nil)
	h, err := sqslambda.New(sqslambda.Config{
		Client: f,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			switch m.Body {
			case "malformed":
				return consumer.Permanent(errors.New("cannot parse the order"))
			case "busy":
				return consumer.RetryAfter(errors.New("warehouse busy"), time.Minute)
			}
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // MessageId → body
	for _, body := range []string{"order", "malformed", "busy"} {
		out, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
		if err != nil {
			t.Fatal(err)
		}
		ids[aws.ToString(out.MessageId)] = body
	}
	ev := fakeEvent(t, f, url, arn, 3)
	resp, err := h.Handle(ctx, ev)
	if err != nil {
		t.Fatalf("Handle = %v, want failures per record only", err)
	}
	settleEvent(t, f, url, ev, resp)

	var failed []string
	for _, x := range resp.BatchItemFailures {
		failed = append(failed, ids[x.ItemIdentifier])
	}
	if !slices.Equal(failed, []string{"busy"}) {
		t.Errorf("batch item failures %v, want [busy]", failed)
	}
	left := f.Messages(url)
	if len(left) != 1 || left[0].Body != "busy" || left[0].State != sqsfake.InFlight {
		t.Fatalf("queue holds %+v, want only busy, in flight", left)
	}
	var changes []int32
	for _, c := range f.VisibilityLog() {
		if c.MessageID == left[0].ID && c.Err == "" {
			changes = append(changes, c.Seconds)
		}
	}
	if len(changes) == 0 || changes[len(changes)-1] != 60 {
		t.Errorf("visibility changes of busy %v, want the last one 60s", changes)
	}
	var dead []string
	for _, m := range f.Messages(dlq) {
		dead = append(dead, m.Body)
	}
	if !slices.Equal(dead, []string{"malformed"}) {
		t.Errorf("dead-letter queue holds %v, want [malformed]", dead)
	}
	problems(t, f)
}
