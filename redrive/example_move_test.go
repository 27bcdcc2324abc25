package redrive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// A dry run shows what a filtered move would do; the move then sends the
// matching dead letters back to their source queue and leaves the rest in
// the DLQ. The SQS here is the in-process fake the tests use.
func ExampleRedriver_Move() {
	ctx := context.Background()
	fake := sqsfake.New()
	dlqURL := fake.AddQueue("orders-dlq", nil)
	srcURL := fake.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
	// Three dead letters as the consumer writes them: two timeouts, one
	// bad payload.
	for i, d := range []struct{ body, class, err string }{
		{`{"order":1}`, deadletter.ClassPermanent, "payment gateway: timeout"},
		{`{"order":2}`, deadletter.ClassPermanent, "payment gateway: timeout"},
		{`{"order":3}`, deadletter.ClassPermanent, "invalid payload"},
	} {
		f, _ := json.Marshal(deadletter.Failure{Class: d.class, Error: d.err, SourceQueue: srcURL, Attempts: 5})
		_, err := fake.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlqURL), MessageBody: aws.String(d.body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(f))},
				deadletter.AttrID:      {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprint("order-", i+1))},
			}})
		if err != nil {
			fmt.Println(err)
			return
		}
	}

	r, err := redrive.New(redrive.Config{Client: fake})
	if err != nil {
		fmt.Println(err)
		return
	}
	dlq, err := r.Queue(ctx, "orders-dlq")
	if err != nil {
		fmt.Println(err)
		return
	}
	only, err := redrive.ParseFilters("class=permanent", "error~timeout")
	if err != nil {
		fmt.Println(err)
		return
	}

	plan, err := r.Plan(ctx, dlq, redrive.MoveOptions{Filters: only})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("dry run: would move %d, skip %d, to %v\n", plan.Matched, plan.Skipped, plan.ByDestination)

	sum, err := r.Move(ctx, dlq, redrive.MoveOptions{Filters: only})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("moved %d, skipped %d, failed %d, refused %d\n", sum.Moved, sum.Skipped, sum.Failed, sum.Refused)
	fmt.Println("orders:", queueBodies(fake, srcURL))
	fmt.Println("orders-dlq:", queueBodies(fake, dlqURL))
	// Output:
	// dry run: would move 2, skip 1, to map[orders:2]
	// moved 2, skipped 1, failed 0, refused 0
	// orders: [{"order":1} {"order":2}]
	// orders-dlq: [{"order":3}]
}

// queueBodies returns the sorted bodies of a fake queue's messages.
func queueBodies(f *sqsfake.Fake, url string) []string {
	var out []string
	for _, m := range f.Messages(url) {
		out = append(out, m.Body)
	}
	sort.Strings(out)
	return out
}
