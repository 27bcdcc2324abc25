package redrive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// ExampleRedriver_Move's scenario on the in-process SQS: a dry run of a
// filtered move counts what the move then does, and changes nothing; the
// move sends the two matching dead letters back to their source queue and
// leaves the third in the DLQ.
func TestPlanThenFilteredMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := sqsfake.New()
	dlqURL := fake.AddQueue("orders-dlq", nil)
	srcURL := fake.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
	// Three dead letters as the consumer writes them: two timeouts, one
	// bad payload.
	for i, d := range []struct{ body, err string }{
		{`{"order":1}`, "payment gateway: timeout"},
		{`{"order":2}`, "payment gateway: timeout"},
		{`{"order":3}`, "invalid payload"},
	} {
		f, err := json.Marshal(deadletter.Failure{Class: deadletter.ClassPermanent, Error: d.err, SourceQueue: srcURL, Attempts: 5})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fake.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlqURL), MessageBody: aws.String(d.body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(f))},
				deadletter.AttrID:      {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprint("order-", i+1))},
			}}); err != nil {
			t.Fatal(err)
		}
	}

	r, err := redrive.New(redrive.Config{Client: fake})
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := r.Queue(ctx, "orders-dlq")
	if err != nil {
		t.Fatal(err)
	}
	only, err := redrive.ParseFilters("class=permanent", "error~timeout")
	if err != nil {
		t.Fatal(err)
	}

	plan, err := r.Plan(ctx, dlq, redrive.MoveOptions{Filters: only})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Matched != 2 || plan.Skipped != 1 || !maps.Equal(plan.ByDestination, map[string]int{"orders": 2}) {
		t.Errorf("dry run: would move %d, skip %d, to %v; want 2, 1, map[orders:2]", plan.Matched, plan.Skipped, plan.ByDestination)
	}
	if got := queueBodies(fake, srcURL); len(got) != 0 {
		t.Errorf("after the dry run orders holds %v, want nothing", got)
	}
	if got := queueBodies(fake, dlqURL); len(got) != 3 {
		t.Errorf("after the dry run orders-dlq holds %v, want all three", got)
	}

	sum, err := r.Move(ctx, dlq, redrive.MoveOptions{Filters: only})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Moved != 2 || sum.Skipped != 1 || sum.Failed != 0 || sum.Refused != 0 {
		t.Errorf("moved %d, skipped %d, failed %d, refused %d; want 2, 1, 0, 0", sum.Moved, sum.Skipped, sum.Failed, sum.Refused)
	}
	if got, want := queueBodies(fake, srcURL), []string{`{"order":1}`, `{"order":2}`}; !slices.Equal(got, want) {
		t.Errorf("orders holds %v, want %v", got, want)
	}
	if got, want := queueBodies(fake, dlqURL), []string{`{"order":3}`}; !slices.Equal(got, want) {
		t.Errorf("orders-dlq holds %v, want %v", got, want)
	}
	if p := fake.Problems(); len(p) > 0 {
		t.Errorf("calls SQS would refuse: %v", p)
	}
}

// queueBodies returns the sorted bodies of a fake queue's messages.
func queueBodies(f *sqsfake.Fake, url string) []string {
	var out []string
	for _, m := range f.Messages(url) {
		out = append(out, m.Body)
	}
	slices.Sort(out)
	return out
}
