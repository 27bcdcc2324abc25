package sqslambda_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// A batch of three: one acked, one permanent failure (sent to the DLQ by
// sqsonce, so Lambda may delete it), one to retry in a minute: the only
// batch item failure of the partial batch response. In a function, pass
// h.Handle to lambda.Start and an *sqs.Client as Client.
func ExampleHandler_Handle() {
	ctx := context.Background()
	// An in-process SQS; in a function, sqs.NewFromConfig(awsCfg).
	sqsClient := sqsfake.New()
	dlqURL := sqsClient.AddQueue("orders-dlq", nil)
	queueURL := sqsClient.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})

	h, err := sqslambda.New(sqslambda.Config{
		Client: sqsClient,
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
		panic(err)
	}

	// What the event source mapping does: receive a batch from the queue
	// and pass it to the function as an SQS event.
	ids := map[string]string{} // MessageId → body
	for _, body := range []string{"order", "malformed", "busy"} {
		out, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)})
		if err != nil {
			panic(err)
		}
		ids[aws.ToString(out.MessageId)] = body
	}
	out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		panic(err)
	}
	var ev events.SQSEvent
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId:      aws.ToString(m.MessageId),
			ReceiptHandle:  aws.ToString(m.ReceiptHandle),
			Body:           aws.ToString(m.Body),
			Attributes:     m.Attributes,
			EventSource:    "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			AWSRegion:      "us-east-1",
		})
	}

	resp, _ := h.Handle(ctx, ev) // never an error: failures are per record
	for _, f := range resp.BatchItemFailures {
		fmt.Println("batch item failure:", ids[f.ItemIdentifier])
	}
	for _, m := range sqsClient.Messages(dlqURL) {
		fmt.Println("dead-lettered:", m.Body)
	}
	// Output:
	// batch item failure: busy
	// dead-lettered: malformed
}
