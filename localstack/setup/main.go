// Command setup creates the demo resources on whatever endpoints the
// standard SDK variables name (the local stack, LocalStack or AWS):
//
//   - sqsonce-demo and its DLQ sqsonce-demo-dlq (maxReceiveCount 5)
//   - sqsonce-demo.fifo and its DLQ sqsonce-demo-dlq.fifo (maxReceiveCount 5)
//   - the dedupe table sqsonce-dedupe, made by dedupedynamo.CreateTable (pk string
//     key, on-demand, TTL on expires_at)
//   - the bucket sqsonce-demo-payloads, for bodies too large for a
//     message (producer.PayloadConfig), on the S3 endpoint
//     (AWS_ENDPOINT_URL_S3; the local stack's fauxqs serves it)
//
// When SQSONCE_MOVE_TASK_ENDPOINT is set (the no-Docker stack sets it), the
// same four queues are created on that endpoint too: local-aws-sqs, which
// answers SQS's message-move-task calls, keeps queues of its own, and
// `sqs-redrive native ... --endpoint-url $SQSONCE_MOVE_TASK_ENDPOINT` looks
// for them there.
//
// It is idempotent; localstack/init/ready.d/setup.sh creates the same names
// inside LocalStack.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/awsconfig"
	"github.com/sqsonce/sqsonce/awsconfig/dynamoclient"
	"github.com/sqsonce/sqsonce/awsconfig/s3client"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
)

// DemoBucket is the bucket setup makes for bodies stored in S3.
const DemoBucket = "sqsonce-demo-payloads"

// envMoveTask names the endpoint of the server that answers the
// message-move-task calls, when it is not the SQS endpoint.
const envMoveTask = "SQSONCE_MOVE_TASK_ENDPOINT"

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdout io.Writer) error {
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return err
	}
	if err := demoQueues(ctx, sqs.NewFromConfig(cfg)); err != nil {
		return err
	}
	if ep := os.Getenv(envMoveTask); ep != "" {
		mt := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(ep) })
		if err := demoQueues(ctx, mt); err != nil {
			return fmt.Errorf("on %s (%s): %w", envMoveTask, ep, err)
		}
	}
	// DynamoDBOptions: DynamoDB Local sends no CRC32 header on error
	// responses (such as "table exists"), which makes the SDK log a
	// checksum warning.
	if err := dedupedynamo.CreateTable(ctx, dynamodb.NewFromConfig(cfg, dynamoclient.Options), dedupedynamo.DefaultTable); err != nil {
		return err
	}
	if err := s3client.EnsureBucket(ctx, s3client.New(cfg), DemoBucket, cfg.Region); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "setup: queues sqsonce-demo, sqsonce-demo-dlq, sqsonce-demo.fifo, sqsonce-demo-dlq.fifo, table sqsonce-dedupe and bucket "+DemoBucket+" are ready")
	if ep := os.Getenv(envMoveTask); ep != "" {
		fmt.Fprintf(stdout, "setup: the same queues are ready for native move tasks at %s (%s)\n", ep, envMoveTask)
	}
	return nil
}

// demoQueues creates the demo queues and their DLQs.
func demoQueues(ctx context.Context, sq *sqs.Client) error {
	for _, fifo := range []bool{false, true} {
		suffix := ""
		if fifo {
			suffix = ".fifo"
		}
		dlq, err := queue(ctx, sq, "sqsonce-demo-dlq"+suffix, fifo, "")
		if err != nil {
			return err
		}
		if _, err := queue(ctx, sq, "sqsonce-demo"+suffix, fifo, dlq); err != nil {
			return err
		}
	}
	return nil
}

// queue creates the queue (with a redrive policy to dlqArn when set) and
// returns its ARN.
func queue(ctx context.Context, client *sqs.Client, name string, fifo bool, dlqArn string) (string, error) {
	attrs := map[string]string{}
	if fifo {
		attrs[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	if dlqArn != "" {
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, dlqArn)
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("queue %s attributes: %w", name, err)
	}
	return a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}
