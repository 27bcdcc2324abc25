package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// deadLetterAgain takes the one message of src and dead-letters it to dlq
// as the consumer does: body and attributes kept, a failure record added.
func deadLetterAgain(t *testing.T, client *sqs.Client, src, dlq string) {
	t.Helper()
	m := testenv.Receive(t, client, src, 1, true)[0]
	f, _ := json.Marshal(deadletter.Failure{Error: "still failing", Class: "permanent", SourceQueue: src, Attempts: 1,
		OriginalMessageID: aws.ToString(m.MessageId), FailedAt: time.Now().UTC()})
	attrs := map[string]types.MessageAttributeValue{}
	for k, v := range m.MessageAttributes {
		attrs[k] = types.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	attrs[deadletter.AttrFailure] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(f))}
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: m.Body, MessageAttributes: attrs}); err != nil {
		t.Fatal(err)
	}
}

// peek shows how many times a dead letter was redriven already (the
// sqsonce-redrive history a move writes): a message that keeps coming
// back is told apart from a first failure.
func TestPeekShowsRedriveCount(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 1, "permanent")
	for range 2 {
		if code, out, errOut := cli(t, "move", dlq, "--yes"); code != 0 {
			t.Fatalf("move: exit %d: %s%s", code, out, errOut)
		}
		deadLetterAgain(t, client, src, dlq)
	}
	code, out, errOut := cli(t, "peek", dlq)
	if code != 0 || !strings.Contains(out, "\nredriven:  2 time(s), last ") || !strings.Contains(out, ", out of "+name(dlq)+"\n") {
		t.Fatalf("peek: exit %d, want a line \"redriven:  2 time(s), last …, out of %s\":\n%s%s", code, name(dlq), out, errOut)
	}
	code, out, errOut = cli(t, "peek", dlq, "--json")
	var o map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o["redrive_count"] != 2.0 || o["redriven_from"] != name(dlq) {
		t.Fatalf("peek --json: exit %d, want redrive_count 2 and redriven_from:\n%s%s", code, out, errOut)
	}
}

// The history is outside input (a producer can write the attribute): its
// DLQ name is escaped, and an attribute that is no history says so.
func TestRedriveHistoryEscaped(t *testing.T) {
	t.Parallel()
	now := time.Now()
	m := &consumer.Message{ID: "m-1", Attributes: map[string]types.MessageAttributeValue{
		redrive.AttrRedrive: {DataType: aws.String("String"), StringValue: aws.String("not a history")}}}
	var out bytes.Buffer
	printEntry(&out, 1, 1, redrive.Entry{Message: m, History: &redrive.History{Count: 3, RedrivenAt: now.Add(-2 * time.Hour), DLQ: "orders-dlq\x1b[2J\r"}}, false)
	printEntry(&out, 1, 1, redrive.Entry{Message: m}, false)
	for _, want := range []string{
		"\nredriven:  3 time(s), last 2h0m0s ago, out of orders-dlq\\x1b[2J\\r\n",
		"\nredriven:  ? (its sqsonce-redrive attribute is not a redrive history)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
