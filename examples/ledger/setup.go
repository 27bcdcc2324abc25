package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/dedupe/dynamo"
)

// maxReceiveCount is the ledger queue's RedrivePolicy: SQS itself moves a
// message to the DLQ after this many receives, as a backstop to sqsonce.
const maxReceiveCount = 5

func cmdSetup(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("setup", stderr)
	n, c, err := g.open(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	dlqArn, err := createQueue(ctx, c.sqs, n.DLQ, n.FIFO, nil)
	if err != nil {
		return err
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, dlqArn, maxReceiveCount)
	if _, err := createQueue(ctx, c.sqs, n.Queue, n.FIFO, map[string]string{
		string(sqstypes.QueueAttributeNameRedrivePolicy): redrive,
	}); err != nil {
		return err
	}
	if err := dynamo.CreateTable(ctx, c.ddb, n.DedupeTable); err != nil {
		return err
	}
	if err := createTable(ctx, c.ddb, n.Ledger, "account"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "setup: queue %s (DLQ %s after %d receives), tables %s and %s are ready\n",
		n.Queue, n.DLQ, maxReceiveCount, n.DedupeTable, n.Ledger)
	return nil
}

// createQueue creates the queue (idempotent: same attributes, same queue)
// and returns its ARN.
func createQueue(ctx context.Context, client *sqs.Client, name string, fifo bool, attrs map[string]string) (string, error) {
	a := map[string]string{}
	for k, v := range attrs {
		a[k] = v
	}
	if fifo {
		a[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	got, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("queue %s attributes: %w", name, err)
	}
	return got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// createTable creates an on-demand table with a string hash key, unless it
// exists, and waits until it is active.
func createTable(ctx context.Context, client *dynamodb.Client, name, hashKey string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(hashKey), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(hashKey), KeyType: ddbtypes.KeyTypeHash}},
	})
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(client)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, err)
	}
	return nil
}
