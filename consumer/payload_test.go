package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/payload/payloadtest"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// sendRaw puts a message on the fake as another client would.
func sendRaw(t *testing.T, f *sqsfake.Fake, q, body string, attrs map[string]types.MessageAttributeValue) {
	t.Helper()
	if _, err := f.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
		t.Fatal(err)
	}
}

// TestPayloadOnFake: the handler sees the bodies AWS's Java and Python
// clients stored in S3, and a compressed body, as sent; a pointer to a
// missing object, and a body that claims compression and does not
// decompress, are dead-lettered at once (class payload, the reason naming
// the object) without running the handler, with their body and
// attributes as SQS carried them; with DeleteAfterAck, the objects of
// acked messages are deleted, and that of a message the handler
// dead-lettered is kept.
func TestPayloadOnFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx, err := payloadtest.Fixtures()
		if err != nil {
			t.Fatal(err)
		}
		f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		s3 := &payloadtest.S3{}
		want := map[string]int{} // body → how many fixtures carry it
		for _, x := range fx {
			s3.Put(x.Object.Bucket, x.Object.Key, x.Object.Content)
			sendRaw(t, f, q, x.Body, x.SQSAttributes())
			want[x.Object.Content]++
		}
		compressed := strings.Repeat(`{"account":"acct-001","amount":42}`, 50)
		z, _ := payload.Compress(compressed)
		sendRaw(t, f, q, z, map[string]types.MessageAttributeValue{payload.AttrEncoding: payload.StringAttr("zstd")})
		missing := payload.Pointer{Bucket: "extended-fixtures", Key: "gone"}
		sendRaw(t, f, q, missing.Body(), map[string]types.MessageAttributeValue{payload.AttrSize: payload.NumberAttr(5), "tenant": payload.StringAttr("acme")})
		sendRaw(t, f, q, "bm90IHpzdGQ=", map[string]types.MessageAttributeValue{payload.AttrEncoding: payload.StringAttr("zstd")})
		rejected := payload.Pointer{Bucket: "extended-fixtures", Key: "rejected"}
		s3.Put(rejected.Bucket, rejected.Key, "rejected by the handler")
		sendRaw(t, f, q, rejected.Body(), map[string]types.MessageAttributeValue{payload.AttrSize: payload.NumberAttr(23)})

		var rc runCounter
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 4,
			Payload:     consumer.PayloadConfig{S3Client: s3, DeleteAfterAck: true},
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				rc.add(m)
				if m.Body == "rejected by the handler" {
					if m.WireBody() != rejected.Body() {
						t.Errorf("WireBody = %q, want the pointer", m.WireBody())
					}
					return consumer.Permanent(errors.New("rejected"))
				}
				return nil
			}),
		})
		waitUntil(time.Minute, func() bool { return len(f.Messages(q)) == 0 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for body, n := range want {
			if runs, _, _ := rc.get(body); runs != n {
				t.Errorf("the handler saw %q %d times, want %d", body, runs, n)
			}
		}
		if runs, _, _ := rc.get(compressed); runs != 1 {
			t.Errorf("the compressed body ran %d times, want once", runs)
		}
		if len(rc.order) != len(fx)+2 {
			t.Errorf("the handler ran %d times, want %d (never for the two bodies that cannot be had)", len(rc.order), len(fx)+2)
		}
		sent := f.Sent(dlq)
		if len(sent) != 3 {
			t.Fatalf("%d dead letters, want 3", len(sent))
		}
		for _, s := range sent {
			var fl deadletter.Failure
			if err := json.Unmarshal([]byte(aws.ToString(s.Attributes[deadletter.AttrFailure].StringValue)), &fl); err != nil {
				t.Fatal(err)
			}
			switch s.Body {
			case missing.Body():
				if fl.Class != consumer.ClassPayload || !strings.Contains(fl.Error, "s3://extended-fixtures/gone") || !strings.Contains(fl.Error, "NoSuchKey") {
					t.Errorf("missing object dead-lettered with %+v", fl)
				}
				if s.Attributes[payload.AttrSize].StringValue == nil || s.Attributes["tenant"].StringValue == nil {
					t.Errorf("the dead letter lost its attributes: %v", s.Attributes)
				}
			case "bm90IHpzdGQ=":
				if fl.Class != consumer.ClassPayload || !strings.Contains(fl.Error, `claims sqsonce-encoding "zstd" and does not decode`) {
					t.Errorf("bad compressed body dead-lettered with %+v", fl)
				}
			case rejected.Body():
				if fl.Class != consumer.ClassPermanent || s.Attributes[payload.AttrSize].StringValue == nil {
					t.Errorf("the handler's dead letter: %+v, attributes %v; want the pointer kept", fl, s.Attributes)
				}
			default:
				t.Errorf("unexpected dead letter %q", s.Body)
			}
		}
		for _, x := range fx {
			if _, ok := s3.Object(x.Object.Bucket, x.Object.Key); ok {
				t.Errorf("%s: the acked message's object is still there (DeleteAfterAck)", x.Name)
			}
		}
		if _, ok := s3.Object(rejected.Bucket, rejected.Key); !ok {
			t.Error("the dead-lettered message's object was deleted")
		}
		checkProblems(t, f)
	})
}

// TestPayloadThrottledOnFake: S3 slowing reads down is a transient
// failure: the message is retried with backoff, not dead-lettered, and
// runs once S3 answers.
func TestPayloadThrottledOnFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		s3 := &payloadtest.S3{GetErr: payloadtest.Throttled}
		p := payload.Pointer{Bucket: "b", Key: "k"}
		s3.Put(p.Bucket, p.Key, "the body")
		sendRaw(t, f, q, p.Body(), map[string]types.MessageAttributeValue{payload.AttrSize: payload.NumberAttr(8)})
		var rc runCounter
		stop := startOnFake(t, f, q, consumer.Config{
			Payload: consumer.PayloadConfig{S3Client: s3},
			Backoff: consumer.Backoff{Base: time.Second, Cap: 2 * time.Second},
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				rc.add(m)
				return nil
			}),
		})
		waitUntil(10*time.Second, func() bool { return s3.GetCalls() >= 3 })
		s3.SetGetErr(nil)
		waitUntil(time.Minute, func() bool { return len(f.Messages(q)) == 0 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if runs, rcount, _ := rc.get("the body"); runs != 1 || rcount < 3 {
			t.Errorf("ran %d times at receive %d; want once, after the throttled receives", runs, rcount)
		}
		if n := len(f.Sent(dlq)); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
		checkProblems(t, f)
	})
}

// TestPayloadWithoutS3Client: a pointer met by a consumer without an S3
// client is dead-lettered with a reason that says what to set.
func TestPayloadWithoutS3Client(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(false, nil, nil)
		p := payload.Pointer{Bucket: "b", Key: "k"}
		sendRaw(t, f, q, p.Body(), map[string]types.MessageAttributeValue{payload.AttrLegacySize: payload.NumberAttr(8)})
		stop := startOnFake(t, f, q, consumer.Config{Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			t.Error("the handler ran")
			return nil
		})})
		waitUntil(time.Minute, func() bool { return len(f.Sent(dlq)) == 1 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		sent := f.Sent(dlq)
		if len(sent) != 1 || !strings.Contains(aws.ToString(sent[0].Attributes[deadletter.AttrFailure].StringValue), "set Payload.S3Client") {
			t.Fatalf("dead letters %+v", sent)
		}
	})
}

func TestPayloadConfigChecked(t *testing.T) {
	_, err := consumer.New(consumer.Config{Client: sqsfake.New(), QueueURL: "q", Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		Payload: consumer.PayloadConfig{DeleteAfterAck: true}})
	if err == nil || !strings.Contains(err.Error(), "Payload.S3Client") {
		t.Errorf("New = %v, want an error naming Payload.S3Client", err)
	}
}
