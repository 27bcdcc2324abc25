package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// env creates the run's queues under one random prefix and deletes them.
type env struct {
	client *sqs.Client
	prefix string
	made   int      // queues created: numbers their names
	urls   []string // queues not yet deleted
	ddb    *dynamodb.Client
	tables []string
}

func newEnv(ctx context.Context, client *sqs.Client, ddb *dynamodb.Client) (*env, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &env{client: client, ddb: ddb, prefix: "bench-" + hex.EncodeToString(b)}, nil
}

func (e *env) queue(ctx context.Context, name string, fifo bool) (string, error) {
	qn := fmt.Sprintf("%s-%s-%d", e.prefix, name, e.made)
	e.made++
	attrs := map[string]string{}
	if fifo {
		qn += ".fifo"
		attrs[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	out, err := e.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(qn), Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", qn, err)
	}
	e.urls = append(e.urls, aws.ToString(out.QueueUrl))
	return aws.ToString(out.QueueUrl), nil
}

// drop deletes the queue at url, made by queue, once its run is over: the
// emulator then frees what it kept of it (a FIFO queue keeps up to 10,000
// deduplication ids for five minutes), so that a run does not carry the
// state of the runs before it. Left to cleanup when it fails.
func (e *env) drop(ctx context.Context, url string) {
	if _, err := e.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err == nil {
		e.urls = slices.DeleteFunc(e.urls, func(u string) bool { return u == url })
	}
}

func (e *env) cleanup() {
	for _, u := range e.urls {
		_, _ = e.client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
	}
	for _, t := range e.tables {
		_, _ = e.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(t)})
	}
}
