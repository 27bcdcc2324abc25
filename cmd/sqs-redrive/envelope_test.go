package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// snsEnvelope is the body SNS delivers to a queue subscribed without raw
// message delivery: the publisher's JSON is the Message string.
func snsEnvelope(id, inner string) string {
	return fmt.Sprintf(`{"Type":"Notification","MessageId":%q,"TopicArn":"arn:aws:sns:us-east-1:123456789012:orders",`+
		`"Message":%q,"Timestamp":"2026-05-02T00:54:06.655Z","SignatureVersion":"1","Signature":"EXAMPLE",`+
		`"SigningCertURL":"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem"}`, id, inner)
}

// putEnveloped dead-letters one SNS notification per order id, as the
// consumer writes it (body unchanged, key as sqsonce-id, failure record),
// and returns the bodies.
func putEnveloped(t *testing.T, client *sqs.Client, dlq, source string, orders ...string) []string {
	t.Helper()
	var out []string
	for i, o := range orders {
		id := fmt.Sprintf("sns-%d-%s", i, testenv.Name("m"))
		body := snsEnvelope(id, fmt.Sprintf(`{"order_id":%q,"amount":%d}`, o, 10+i))
		f, _ := json.Marshal(deadletter.Failure{Error: "card declined", Class: "permanent", SourceQueue: source, Attempts: 1,
			OriginalMessageID: "orig-" + id, FailedAt: time.Now().Add(-time.Minute).UTC()})
		_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl:    aws.String(dlq),
			MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				consumer.AttrID:        {DataType: aws.String("String"), StringValue: aws.String(id)},
				deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(f))},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, body)
	}
	return out
}

// Dead letters of an SNS-fed queue keep SNS's envelope: --json-field
// looks at the publisher's message inside it, so a filter on the order id
// moves that order's dead letter, the envelope unchanged.
func TestJSONFieldInsideSNSEnvelope(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	bodies := putEnveloped(t, client, dlq, src, "o-1", "o-2", "o-3", "o-4")

	code, out, errOut := cli(t, "peek", dlq, "--json-field", "order_id~^o-[12]$", "--json")
	if code != 0 || len(strings.Split(strings.TrimSpace(out), "\n")) != 2 {
		t.Fatalf("peek: exit %d, want 2 lines:\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "move", dlq, "--json-field", "order_id=o-3", "--yes", "--json")
	if code != 0 {
		t.Fatalf("move: exit %d: %s%s", code, out, errOut)
	}
	if o := summaryOf(t, out); num(o, "moved") != 1 || num(o, "skipped") != 3 {
		t.Fatalf("move --json-field order_id=o-3: moved %d, skipped %d, want 1 and 3: %s", num(o, "moved"), num(o, "skipped"), out)
	}
	if n := count(t, client, src); n != 1 {
		t.Fatalf("source holds %d, want 1", n)
	}
	if got := testenv.Receive(t, client, src, 1, true); aws.ToString(got[0].Body) != bodies[2] {
		t.Fatalf("source received %q, want the envelope of o-3 unchanged", aws.ToString(got[0].Body))
	}
	if n := count(t, client, dlq); n != 3 {
		t.Fatalf("dlq holds %d, want 3", n)
	}
}
