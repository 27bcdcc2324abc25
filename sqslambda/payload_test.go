package sqslambda_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/payload/payloadtest"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// TestPayloadLambda: the Lambda adapter reads what the consumer reads
// (the same pipeline): a Java client's pointer and a compressed body
// reach the handler as sent; a missing object is dead-lettered (class
// payload) with its pointer and reported as a success.
func TestPayloadLambda(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx, err := payloadtest.Fixtures()
		if err != nil {
			t.Fatal(err)
		}
		java := fx[0]
		f, url, arn, dlq := fakeQueues(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		s3 := &payloadtest.S3{}
		s3.Put(java.Object.Bucket, java.Object.Key, java.Object.Content)
		send := func(body string, attrs map[string]types.MessageAttributeValue) {
			if _, err := f.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
				t.Fatal(err)
			}
		}
		send(java.Body, java.SQSAttributes())
		long := strings.Repeat("compress me ", 100)
		z, _ := payload.Compress(long)
		send(z, map[string]types.MessageAttributeValue{payload.AttrEncoding: payload.StringAttr("zstd")})
		gone := payload.Pointer{Bucket: "b", Key: "gone"}
		send(gone.Body(), map[string]types.MessageAttributeValue{payload.AttrSize: payload.NumberAttr(3)})

		seen := map[string]int{}
		h, err := sqslambda.New(sqslambda.Config{
			Client:  f,
			Payload: consumer.PayloadConfig{S3Client: s3},
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				seen[m.Body]++
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		ev := fakeEvent(t, f, url, arn, 3)
		resp, err := h.Handle(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %+v, %v; want every record a success", resp, err)
		}
		settleEvent(t, f, url, ev, resp)
		if seen[java.Object.Content] != 1 || seen[long] != 1 || len(seen) != 2 {
			t.Errorf("the handler saw %v", seen)
		}
		sent := f.Sent(dlq)
		if len(sent) != 1 || sent[0].Body != gone.Body() {
			t.Fatalf("dead letters %+v, want the pointer to the missing object", sent)
		}
		var fl deadletter.Failure
		_ = json.Unmarshal([]byte(aws.ToString(sent[0].Attributes[deadletter.AttrFailure].StringValue)), &fl)
		if fl.Class != consumer.ClassPayload || !strings.Contains(fl.Error, "s3://b/gone") {
			t.Errorf("failure %+v", fl)
		}
		problems(t, f)
	})
	if _, err := sqslambda.New(sqslambda.Config{Client: &fakeSQS{}, Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		Payload: consumer.PayloadConfig{S3Client: &payloadtest.S3{}, DeleteAfterAck: true}}); err == nil {
		t.Error("New accepted DeleteAfterAck")
	}
}
