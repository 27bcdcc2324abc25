package sqslambdatest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/sqslambda/sqslambdatest"
)

// Against the local stack's SQS: the records carry what the server
// returned (the MD5s, the system attributes, the FIFO group, deduplication
// id and sequence number), a reported failure stays in flight, and the
// success is deleted.
func TestLocalStack(t *testing.T) {
	client := testenv.SQS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, fifo := range []bool{false, true} {
		url, arn := testenv.Queue(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: fifo, VisibilityTimeout: 60})
		for _, body := range []string{"ok", "bad"} {
			in := &sqs.SendMessageInput{
				QueueUrl: aws.String(url), MessageBody: aws.String(body),
				MessageAttributes: map[string]types.MessageAttributeValue{
					"sqsonce-id": {DataType: aws.String("String"), StringValue: aws.String("job-" + body)},
				},
			}
			if fifo {
				// Two groups: the local stack returns one message per
				// group per receive.
				in.MessageGroupId, in.MessageDeduplicationId = aws.String("g-"+body), aws.String("d-"+body)
			}
			if _, err := client.SendMessage(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		var records []events.SQSMessage
		esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{
			Client: client, QueueURL: url, FunctionTimeout: 10 * time.Second,
			HandleFunc: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				records = append(records, ev.Records...)
				return fails("bad")(ctx, ev)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if esm.QueueARN() != arn {
			t.Errorf("QueueARN = %q, want %q", esm.QueueARN(), arn)
		}
		var failed, deleted []string
		for len(records) < 2 {
			r, err := esm.Poll(ctx)
			if err != nil || r.Err != nil {
				t.Fatalf("Poll = %v, %v", r.Err, err)
			}
			failed, deleted = append(failed, r.Failed...), append(deleted, r.Deleted...)
		}
		for _, r := range records {
			a := r.Attributes
			if r.EventSource != "aws:sqs" || r.EventSourceARN != arn || r.AWSRegion == "" || r.Md5OfBody == "" || r.ReceiptHandle == "" ||
				a["ApproximateReceiveCount"] != "1" || a["SentTimestamp"] == "" || a["ApproximateFirstReceiveTimestamp"] == "" {
				t.Errorf("fifo=%v: record %+v", fifo, r)
			}
			if v := r.MessageAttributes["sqsonce-id"]; aws.ToString(v.StringValue) != "job-"+r.Body || v.DataType != "String" {
				t.Errorf("fifo=%v: sqsonce-id attribute %+v", fifo, v)
			}
			if fifo && (a["MessageGroupId"] != "g-"+r.Body || a["MessageDeduplicationId"] != "d-"+r.Body || a["SequenceNumber"] == "") {
				t.Errorf("fifo: attributes %v", a)
			}
		}
		if len(failed) != 1 || len(deleted) != 1 || slices.Equal(failed, deleted) {
			t.Errorf("fifo=%v: failed %v, deleted %v; want one each", fifo, failed, deleted)
		}
		if visible, inFlight := testenv.Count(t, client, url); visible != 0 || inFlight != 1 {
			t.Errorf("fifo=%v: %d visible, %d in flight; want the failure in flight", fifo, visible, inFlight)
		}
	}
}
