package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// A dead letter whose body is in S3: peek shows its object and size,
// peek --body shows the body read from S3, and move sends the pointer
// back unchanged (no re-upload), its size attribute kept.
func TestPeekAndMoveS3Pointer(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	s3c := testenv.S3(t)
	bucket := testenv.Bucket(t, s3c, "redrive")
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	ctx := context.Background()
	const stored = `{"order":42,"memo":"stored in S3"}`
	ptr := payload.Pointer{Bucket: bucket, Key: "orders/0b6f3a52"}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(ptr.Key), Body: strings.NewReader(stored)}); err != nil {
		t.Fatal(err)
	}
	f, _ := json.Marshal(deadletter.Failure{Error: "boom", Class: "permanent", SourceQueue: src, Attempts: 1, OriginalMessageID: "orig", FailedAt: time.Now().UTC()})
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(ptr.Body()),
		MessageAttributes: map[string]types.MessageAttributeValue{
			payload.AttrSize:       payload.NumberAttr(int64(len(stored))),
			consumer.AttrID:        payload.StringAttr("job-1"),
			deadletter.AttrFailure: payload.StringAttr(string(f)),
		}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "peek", dlq)
	if code != 0 || !strings.Contains(out, "payload:   s3://"+bucket+"/orders/0b6f3a52 (34 bytes)") {
		t.Fatalf("peek: exit %d: %s %s", code, out, errOut)
	}
	code, out, errOut = cli(t, "peek", dlq, "--body")
	if code != 0 || !strings.Contains(out, "body:\n"+stored) {
		t.Fatalf("peek --body: exit %d: %s %s", code, out, errOut)
	}
	code, out, errOut = cli(t, "peek", dlq, "--body", "--json")
	var o map[string]any
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &o) != nil || o["body"] != stored || o["payload"] != ptr.String() || o["payload_bytes"] != "34" {
		t.Fatalf("peek --body --json: exit %d: %s %s", code, out, errOut)
	}
	if code, out, errOut := cli(t, "move", dlq, "--to", src, "--yes"); code != 0 {
		t.Fatalf("move: exit %d: %s %s", code, out, errOut)
	}
	got := testenv.Receive(t, client, src, 1, true)
	if aws.ToString(got[0].Body) != ptr.Body() || aws.ToString(got[0].MessageAttributes[payload.AttrSize].StringValue) != "34" {
		t.Fatalf("moved %q with attributes %v; want the pointer unchanged", aws.ToString(got[0].Body), got[0].MessageAttributes)
	}
	if keys := testenv.Objects(t, s3c, bucket); len(keys) != 1 {
		t.Errorf("objects %v after the move, want the one", keys)
	}
}
