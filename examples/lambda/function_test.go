package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// event receives n messages from url and builds the event the event
// source mapping would deliver.
func event(t *testing.T, client *sqs.Client, url, arn string, n int) (events.SQSEvent, []types.Message) {
	t.Helper()
	msgs := testenv.Receive(t, client, url, n, false)
	var ev events.SQSEvent
	for _, m := range msgs {
		r := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSourceARN: arn, EventSource: "aws:sqs",
			MessageAttributes: map[string]events.SQSMessageAttribute{},
		}
		for k, v := range m.MessageAttributes {
			r.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
		ev.Records = append(ev.Records, r)
	}
	return ev, msgs
}

// handled counts the "order handled" log lines.
func handled(t *testing.T, logs string) int {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if line["msg"] == "order handled" {
			n++
		}
	}
	return n
}

// The function main starts, exercised in-process against the local stack:
// orders handled, a malformed one dead-lettered by sqsonce and reported as
// success, and a duplicate of an order acked without running again.
func TestFunction(t *testing.T) {
	client := testenv.SQS(t)
	db := testenv.Dynamo(t)
	url, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 180})
	attrs, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	arn := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	table := testenv.Name("lambda-example-dedupe")
	if err := dedupedynamo.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})

	env := map[string]string{"QUEUE_URL": url, "DEDUPE_TABLE": table, "AWS_LAMBDA_FUNCTION_TIMEOUT": "30", "LOG_LEVEL": "debug"}
	var logs bytes.Buffer
	h, logger, err := newFunction(context.Background(), func(k string) string { return env[k] }, &logs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logger.Sync() }()
	if err := h.Check(context.Background()); err != nil {
		t.Errorf("Check = %v: 180s visibility is 6 × 30s", err)
	}

	sendOrder := func(body, id string) {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}
		if id != "" {
			in.MessageAttributes = map[string]types.MessageAttributeValue{consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(id)}}
		}
		if _, err := client.SendMessage(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	invoke := func(n int) {
		ev, msgs := event(t, client, url, arn, n)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := h.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %v, %v; want no failures", resp.BatchItemFailures, err)
		}
		for _, m := range msgs { // the event source mapping deletes what succeeded
			if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}

	sendOrder(`{"order_id":"o-1","amount":3}`, "job-1")
	sendOrder(`{"order_id":"o-2","amount":4}`, "job-2")
	sendOrder(`{"amount":4}`, "")
	invoke(3)
	if n := handled(t, logs.String()); n != 2 {
		t.Errorf("%d orders handled, want 2", n)
	}
	sendOrder(`{"order_id":"o-1","amount":3}`, "job-1") // the same job, sent again
	invoke(1)
	if n := handled(t, logs.String()); n != 2 {
		t.Errorf("%d orders handled after the duplicate, want still 2", n)
	}
	if visible, _ := testenv.Count(t, client, dlq); visible != 1 {
		t.Errorf("DLQ holds %d messages, want the malformed order", visible)
	}
}

func TestFunctionConfig(t *testing.T) {
	for _, env := range []map[string]string{{"LOG_LEVEL": "loud"}, {"CONCURRENCY": "0"}} {
		if _, _, err := newFunction(context.Background(), func(k string) string { return env[k] }, &bytes.Buffer{}); err == nil {
			t.Errorf("newFunction(%v) succeeded", env)
		}
	}
}

// The template keeps the queue's visibility timeout at 6 × the function
// timeout or more, and turns partial batch responses on.
func TestTemplate(t *testing.T) {
	b, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	num := func(re string) int {
		m := regexp.MustCompile(re).FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("template: no match for %s", re)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	timeout := num(`Function:\s+Seconds: (\d+)`)
	vis := num(`VisibilitySeconds: (\d+)`)
	if vis < 6*timeout {
		t.Errorf("visibility %ds < 6 × function timeout %ds", vis, timeout)
	}
	for _, want := range []string{
		"- ReportBatchItemFailures",
		"AttributeName: expires_at\n        Enabled: true",
		"AttributeName: pk\n          AttributeType: S",
		"deadLetterTargetArn: !GetAtt DeadLetterQueue.Arn",
		"Timeout: !FindInMap [Timeouts, Function, Seconds]",
		"VisibilityTimeout: !FindInMap [Timeouts, Queue, VisibilitySeconds]",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("template lacks %q", want)
		}
	}
	if strings.Contains(s, `Resource: "*"`) || strings.Contains(s, "Resource: '*'") {
		t.Error("template grants a wildcard resource")
	}
}

// resources splits the template's Resources section into each resource's
// lines, by name.
func resources(t *testing.T, s string) map[string]string {
	t.Helper()
	_, rest, ok := strings.Cut(s, "\nResources:\n")
	if !ok {
		t.Fatal("template has no Resources section")
	}
	out := map[string]string{}
	name := ""
	for line := range strings.Lines(rest) {
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
		case !strings.HasPrefix(line, " "): // the next section
			return out
		case !strings.HasPrefix(line, "   "): // "  Name:"
			name = strings.TrimSuffix(strings.TrimSpace(line), ":")
		default:
			out[name] += line
		}
	}
	return out
}

// The template alarms on a non-empty dead-letter queue and on the age of
// the source queue's oldest message (threshold a parameter), both to the
// SNS topic.
func TestTemplateAlarms(t *testing.T) {
	b, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := resources(t, string(b))
	if !strings.Contains(res["AlarmTopic"], "Type: AWS::SNS::Topic") {
		t.Fatalf("no SNS topic AlarmTopic: %q", res["AlarmTopic"])
	}
	if !strings.Contains(string(b), "\n  OldestMessageAgeAlarmSeconds:\n    Type: Number") {
		t.Error("no OldestMessageAgeAlarmSeconds parameter")
	}
	alarms := map[string]int{}
	for name, body := range res {
		if strings.Contains(body, "Type: AWS::CloudWatch::Alarm") {
			alarms[name]++
		}
	}
	for name, want := range map[string][]string{
		"DeadLetterQueueNotEmptyAlarm": {
			"Namespace: AWS/SQS",
			"MetricName: ApproximateNumberOfMessagesVisible",
			"- Name: QueueName\n          Value: !GetAtt DeadLetterQueue.QueueName\n",
			"Threshold: 0\n",
			"ComparisonOperator: GreaterThanThreshold\n",
			"AlarmActions: [!Ref AlarmTopic]",
		},
		"OldestMessageAgeAlarm": {
			"Namespace: AWS/SQS",
			"MetricName: ApproximateAgeOfOldestMessage",
			"- Name: QueueName\n          Value: !GetAtt Queue.QueueName\n",
			"Threshold: !Ref OldestMessageAgeAlarmSeconds\n",
			"ComparisonOperator: GreaterThanOrEqualToThreshold\n",
			"AlarmActions: [!Ref AlarmTopic]",
		},
	} {
		body := res[name]
		if alarms[name] != 1 {
			t.Errorf("no CloudWatch alarm %s", name)
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, body)
			}
		}
	}
	if len(alarms) != 2 {
		t.Errorf("alarms %v, want exactly the two above", alarms)
	}
}
