package sqslambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/sqslambda"
)

func queueARN(t *testing.T, client *sqs.Client, url string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)]
}

// receive receives n messages from url, with every attribute.
func receive(t *testing.T, client *sqs.Client, url string, n int) []types.Message {
	t.Helper()
	return testenv.Receive(t, client, url, n, false)
}

// invoke does what the event source mapping does: receives n messages,
// invokes the function with them, and deletes those not reported as
// failures. It returns the response and the received messages.
func invoke(t *testing.T, a *sqslambda.Handler, client *sqs.Client, url, arn string, n int) (events.SQSEventResponse, []types.Message) {
	t.Helper()
	msgs := receive(t, client, url, n)
	var ev events.SQSEvent
	for _, m := range msgs {
		r := events.SQSMessage{
			MessageId:      aws.ToString(m.MessageId),
			ReceiptHandle:  aws.ToString(m.ReceiptHandle),
			Body:           aws.ToString(m.Body),
			Md5OfBody:      aws.ToString(m.MD5OfBody),
			Attributes:     m.Attributes,
			EventSourceARN: arn,
			EventSource:    "aws:sqs",
		}
		for name, v := range m.MessageAttributes {
			if r.MessageAttributes == nil {
				r.MessageAttributes = map[string]events.SQSMessageAttribute{}
			}
			r.MessageAttributes[name] = events.SQSMessageAttribute{
				DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue,
			}
		}
		ev.Records = append(ev.Records, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := a.Handle(ctx, ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
	}
	return resp, msgs
}

func idOf(msgs []types.Message, body string) string {
	for _, m := range msgs {
		if aws.ToString(m.Body) == body {
			return aws.ToString(m.MessageId)
		}
	}
	return ""
}

func send(t *testing.T, client *sqs.Client, in *sqs.SendMessageInput) {
	t.Helper()
	if _, err := client.SendMessage(context.Background(), in); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func TestIntegrationDeadLetter(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	url, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 120})
	arn := queueARN(t, client, url)
	blob := []byte{0, 1, 2, 0xfe, 0xff}
	send(t, client, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("ack")})
	send(t, client, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("retry")})
	send(t, client, &sqs.SendMessageInput{
		QueueUrl:    aws.String(url),
		MessageBody: aws.String("perm the poison one"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
			"blob":   {DataType: aws.String("Binary"), BinaryValue: blob},
			"amount": {DataType: aws.String("Number"), StringValue: aws.String("42")},
		},
	})

	h := &scripted{}
	a := newHandler(t, client, h, nil) // the DLQ comes from the RedrivePolicy
	resp, msgs := invoke(t, a, client, url, arn, 3)
	if got, want := failures(resp), idOf(msgs, "retry"); got != want {
		t.Errorf("batchItemFailures = %q, want %q (the retry)", got, want)
	}

	dead := receive(t, client, dlq, 1)[0]
	if got := aws.ToString(dead.Body); got != "perm the poison one" {
		t.Errorf("dead letter body %q", got)
	}
	at := dead.MessageAttributes
	if aws.ToString(at["tenant"].StringValue) != "acme" || aws.ToString(at["amount"].StringValue) != "42" ||
		!slices.Equal(at["blob"].BinaryValue, blob) || aws.ToString(at["blob"].DataType) != "Binary" {
		t.Errorf("original attributes not kept: %v", at)
	}
	permID := idOf(msgs, "perm the poison one")
	if got := aws.ToString(at[consumer.AttrID].StringValue); got != permID {
		t.Errorf("%s = %q, want the MessageId %q", consumer.AttrID, got, permID)
	}
	var f deadletter.Failure
	if err := json.Unmarshal([]byte(aws.ToString(at[deadletter.AttrFailure].StringValue)), &f); err != nil {
		t.Fatalf("%s: %v", deadletter.AttrFailure, err)
	}
	if f.Class != consumer.ClassPermanent || !strings.Contains(f.Error, "malformed order") ||
		f.SourceQueue != url || f.OriginalMessageID != permID || f.Attempts != 1 || f.FailedAt.IsZero() {
		t.Errorf("failure = %+v", f)
	}
	// The source queue: ack and dead letter deleted, the retry in flight
	// for its 30s delay.
	if visible, inFlight := testenv.Count(t, client, url); visible != 0 || inFlight != 1 {
		t.Errorf("source queue: %d visible, %d in flight; want 0 and 1 (the retry)", visible, inFlight)
	}
}

func TestIntegrationFIFO(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	url, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true, VisibilityTimeout: 120})
	arn := queueARN(t, client, url)
	for i, body := range []string{"perm", "ack"} {
		send(t, client, &sqs.SendMessageInput{
			QueueUrl: aws.String(url), MessageBody: aws.String(body),
			MessageGroupId: aws.String("g1"), MessageDeduplicationId: aws.String(fmt.Sprint("d", i)),
		})
	}
	h := &scripted{}
	a := newHandler(t, client, h, nil)
	// The server hands out one message per group per receive.
	for range 2 {
		if resp, _ := invoke(t, a, client, url, arn, 1); len(resp.BatchItemFailures) != 0 {
			t.Errorf("batchItemFailures = %v, want none", resp.BatchItemFailures)
		}
	}
	dead := receive(t, client, dlq, 1)[0]
	if g := dead.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "g1" {
		t.Errorf("dead letter group %q, want g1", g)
	}
	if aws.ToString(dead.Body) != "perm" {
		t.Errorf("dead letter body %q", aws.ToString(dead.Body))
	}
	if r := h.runs(); len(r) != 2 {
		t.Errorf("handler ran %v, want both in order", r)
	}
}

func TestIntegrationDedupe(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	db := testenv.Dynamo(t)
	table := testenv.Name("sqslambda-dedupe")
	if err := dedupedynamo.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: db, Table: table, Namespace: "sqslambda-test"})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 120})
	arn := queueARN(t, client, url)

	var runs atomic.Int32
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { runs.Add(1); return nil })
	dd, err := dedupe.New(dedupe.Config{Store: store, Lease: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a, err := sqslambda.New(sqslambda.Config{
		Client:     client,
		Handler:    h,
		Middleware: []consumer.Middleware{dd.Wrap},
	})
	if err != nil {
		t.Fatal(err)
	}
	sendCredit := func() {
		send(t, client, &sqs.SendMessageInput{
			QueueUrl: aws.String(url), MessageBody: aws.String(`{"credit":"c-1"}`),
			MessageAttributes: map[string]types.MessageAttributeValue{
				consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String("credit-1")},
			},
		})
	}
	// The same job sent twice, delivered to two invocations.
	sendCredit()
	if resp, _ := invoke(t, a, client, url, arn, 1); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("first invocation: failures %v", resp.BatchItemFailures)
	}
	sendCredit()
	if resp, _ := invoke(t, a, client, url, arn, 1); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("second invocation: failures %v", resp.BatchItemFailures)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	item, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{dedupedynamo.AttrPK: &ddbtypes.AttributeValueMemberS{Value: store.PK("credit-1")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := item.Item[dedupedynamo.AttrStatus].(*ddbtypes.AttributeValueMemberS); !ok || s.Value != dedupe.StatusCompleted {
		t.Errorf("dedupe record %v, want status COMPLETED", item.Item)
	}
	if visible, inFlight := testenv.Count(t, client, url); visible != 0 || inFlight != 0 {
		t.Errorf("queue: %d visible, %d in flight; want empty", visible, inFlight)
	}
}
