package settle_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// TestDeadLetterKeepsUserAttributesAcrossRedrives (issue 42, defect 19): a
// message with SQS's 10 attributes, 8 of them the producer's own beside
// sqsonce-id and a redrive history (sqsonce-redrive), fails, is redriven
// with the redrive tool, fails again, and so on. A dead letter must add
// sqsonce-failure, so one attribute goes: the redrive history, which the
// next redrive writes again, never one of the producer's. Before, the
// user attribute whose name sorts last went on each cycle.
func TestDeadLetterKeepsUserAttributesAcrossRedrives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sqsfake.New()
	dlq := f.AddQueue("orders-dlq", nil)
	src := f.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	attrs := map[string]types.MessageAttributeValue{
		deadletter.AttrID:   str("job-7"),
		redrive.AttrRedrive: str(`{"count":1,"redriven_at":"2026-01-02T03:04:05Z","dlq":"orders-dlq"}`),
	}
	var user []string
	for i := range 8 {
		name := fmt.Sprintf("user-%d", i)
		attrs[name] = str(fmt.Sprint(i))
		user = append(user, name)
	}
	if _, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String(`{"order":7}`), MessageAttributes: attrs}); err != nil {
		t.Fatal(err)
	}
	r, err := redrive.New(redrive.Config{Client: f, WaitTime: time.Millisecond, EmptyReceives: 1})
	if err != nil {
		t.Fatal(err)
	}
	dq, err := r.Queue(ctx, "orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	for cycle := 1; cycle <= 3; cycle++ {
		out, err := f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(src), MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("cycle %d: receive: %v, %d messages", cycle, err, len(out.Messages))
		}
		m := out.Messages[0]
		if missing := missingAttributes(m.MessageAttributes, user); len(missing) > 0 {
			t.Fatalf("cycle %d: the message lost %v of its producer's attributes; it has %v", cycle, missing, slices.Sorted(maps.Keys(m.MessageAttributes)))
		}
		err = settle.Send(ctx, f, zap.NewNop(), "test", settle.Letter{
			Msg:    settle.Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), ReceiveCount: 1, Attributes: m.MessageAttributes},
			Reason: "bad input", SourceQueue: src, DLQ: dlq, Now: time.Now(),
		})
		if err != nil {
			t.Fatalf("cycle %d: dead letter: %v", cycle, err)
		}
		if _, err := f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(src), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		sent := f.Sent(dlq)
		letter := sent[len(sent)-1].Attributes
		if missing := missingAttributes(letter, append(user, deadletter.AttrID, deadletter.AttrFailure)); len(missing) > 0 {
			t.Fatalf("cycle %d: the dead letter lost %v; it has %v", cycle, missing, slices.Sorted(maps.Keys(letter)))
		}
		sum, err := r.Move(ctx, dq, redrive.MoveOptions{To: "orders"})
		if err != nil || sum.Moved != 1 {
			t.Fatalf("cycle %d: move: %+v, %v", cycle, sum, err)
		}
	}
	for _, p := range f.Problems() {
		t.Errorf("SQS contract violation: %s", p)
	}
}

// missingAttributes returns the names in want that attrs lacks.
func missingAttributes(attrs map[string]types.MessageAttributeValue, want []string) []string {
	var missing []string
	for _, n := range want {
		if _, ok := attrs[n]; !ok {
			missing = append(missing, n)
		}
	}
	return missing
}
