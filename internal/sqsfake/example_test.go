package sqsfake_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

func Example() {
	ctx := context.Background()
	f := sqsfake.New()
	q := f.AddQueue("orders.fifo", nil)
	f.Put(q, "first", "customer-7")
	f.Put(q, "second", "customer-7")

	// A FIFO receive returns several messages of a group, in order.
	out, _ := f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10})
	for _, m := range out.Messages {
		fmt.Println(aws.ToString(m.Body))
	}

	// The delete is applied but its response is lost.
	f.Inject(func(op string, _ any) sqsfake.Fault {
		return sqsfake.Fault{LoseResponse: op == "DeleteMessage"}
	})
	_, err := f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: out.Messages[0].ReceiptHandle})
	fmt.Println(errors.Is(err, sqsfake.ErrResponseLost), len(f.Messages(q)))

	_, err = f.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	var missing *types.QueueDoesNotExist
	fmt.Println(errors.As(err, &missing), f.Calls("ReceiveMessage"), len(f.Problems()))
	// Output:
	// first
	// second
	// true 1
	// true 1 0
}
