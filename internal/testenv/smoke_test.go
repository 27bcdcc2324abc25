package testenv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestStackSQS proves the SQS endpoint from the standard variables answers a
// send and a long-poll receive.
func TestStackSQS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := testenv.SQS(t)
	q, _ := testenv.Queue(t, client, "smoke", testenv.QueueOptions{})
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("hello")}); err != nil {
		t.Fatalf("send: %v", err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 2, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "hello" {
		t.Fatalf("received %+v, want one message with body hello", out.Messages)
	}
}

// TestStackSNS proves the SNS endpoint (AWS_ENDPOINT_URL_SNS, else the
// SQS one, which fauxqs also serves SNS on) fans a publication out to a
// subscribed queue.
func TestStackSNS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqsClient, snsClient := testenv.SQS(t), testenv.SNS(t)
	q, arn := testenv.Queue(t, sqsClient, "smoke-sns", testenv.QueueOptions{})
	topic := testenv.Topic(t, snsClient, "smoke", testenv.TopicOptions{})
	testenv.Subscribe(t, snsClient, topic, arn, true)
	if _, err := snsClient.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String("hello")}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	got := testenv.Receive(t, sqsClient, q, 1, true)
	if aws.ToString(got[0].Body) != "hello" {
		t.Fatalf("received %q, want hello", aws.ToString(got[0].Body))
	}
}

// TestStackDynamoDB proves conditional writes and transactions work on the
// DynamoDB endpoint from the standard variables.
func TestStackDynamoDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := testenv.Dynamo(t)
	table := testenv.Table(t, client, "smoke", "pk", "")
	put := func() error {
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           &table,
			Item:                                map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k1"}},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	if err := put(); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if err := put(); !errors.As(err, &ccf) {
		t.Fatalf("second conditional put: got %v, want ConditionalCheckFailedException", err)
	} else if ccf.Item["pk"] == nil {
		t.Fatalf("ConditionalCheckFailedException without the old item (ReturnValuesOnConditionCheckFailure)")
	}

	item := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}
	}
	// A fresh input per call: the SDK stores its generated ClientRequestToken
	// in the input, and DynamoDB treats a repeated token as an idempotent
	// replay that succeeds.
	tx := func() *dynamodb.TransactWriteItemsInput {
		return &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{Put: &ddbtypes.Put{TableName: &table, Item: item("k2"), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			{Put: &ddbtypes.Put{TableName: &table, Item: item("k3"), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}}
	}
	if _, err := client.TransactWriteItems(ctx, tx()); err != nil {
		t.Fatalf("transaction: %v", err)
	}
	var tce *ddbtypes.TransactionCanceledException
	if _, err := client.TransactWriteItems(ctx, tx()); !errors.As(err, &tce) {
		t.Fatalf("repeated transaction: got %v, want TransactionCanceledException", err)
	} else if len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "ConditionalCheckFailed" {
		t.Fatalf("cancellation reasons: %+v", tce.CancellationReasons)
	}
}
