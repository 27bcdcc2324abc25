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

	"github.com/sqsonce/sqsonce/awsconfig/s3client"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/producer"
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
	defer c.close()
	if _, err := producer.CreateQueue(ctx, c.sqs, producer.QueueConfig{
		Name:              n.Queue,
		FIFO:              n.FIFO,
		DeadLetterName:    n.DLQ,
		VisibilityTimeout: 30 * time.Second,
		MaxReceiveCount:   maxReceiveCount,
	}); err != nil {
		return err
	}
	// Credits sent with a memo too large for a message go to S3.
	if err := s3client.EnsureBucket(ctx, c.s3, n.Bucket, c.region); err != nil {
		return err
	}
	if n.Store == storePostgres {
		if err := setupPostgres(ctx, c.pg, n.Schema); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "setup: queue %s (DLQ %s after %d receives), tables %s, %s, %s and %s, bucket %s are ready\n",
			n.Queue, n.DLQ, maxReceiveCount, n.DedupeTable, n.Ledger, n.IdempotencyTable, n.Outbox, n.Bucket)
		return nil
	}
	if err := dedupedynamo.CreateTable(ctx, c.ddb, n.DedupeTable); err != nil {
		return err
	}
	if err := createTable(ctx, c.ddb, n.Ledger, "account"); err != nil {
		return err
	}
	if err := idemdynamo.CreateTable(ctx, c.ddb, n.IdempotencyTable); err != nil {
		return err
	}
	if err := outboxdynamo.CreateTable(ctx, c.ddb, n.Outbox); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "setup: queue %s (DLQ %s after %d receives), tables %s, %s, %s and %s are ready\n",
		n.Queue, n.DLQ, maxReceiveCount, n.DedupeTable, n.Ledger, n.IdempotencyTable, n.Outbox)
	return nil
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
