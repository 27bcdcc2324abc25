package envelope_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/envelope"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seen is what the handler saw.
type seen struct {
	body, key string
	attrs     map[string]types.MessageAttributeValue
	env       *envelope.Envelope
}

func run(t *testing.T, msg *consumer.Message, opts envelope.Options) (consumertest.Result, seen) {
	t.Helper()
	var s seen
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		s = seen{body: m.Body, key: m.Key(), attrs: m.Attributes, env: envelope.FromContext(ctx)}
		return nil
	})
	return consumertest.Process(context.Background(), h, msg, envelope.Unwrap(opts)), s
}

func TestSNSNotification(t *testing.T) {
	body := fixture(t, "sns-notification.json")
	msg := consumertest.NewMessage(body)
	res, s := run(t, msg, envelope.Options{})
	if res.Outcome != consumer.OutcomeAck {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if s.body != `{"order":"o-1","amount":42}` || s.key != "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324" {
		t.Fatalf("handler saw body %q key %q, want the inner message and the SNS MessageId", s.body, s.key)
	}
	want := envelope.Envelope{Kind: envelope.SNS, Type: "Notification", ID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", Topic: "arn:aws:sns:us-west-2:123456789012:MyTopic",
		Subject: "My First Message", Time: time.Date(2012, 5, 2, 0, 54, 6, 655e6, time.UTC)}
	if s.env == nil || *s.env != want {
		t.Fatalf("envelope %+v, want %+v", s.env, want)
	}
	if msg.Body != body {
		t.Fatal("the message's body was not restored after the handler")
	}
}

func TestSNSAttributesAndInnerID(t *testing.T) {
	res, s := run(t, consumertest.NewMessage(fixture(t, "sns-with-attributes.json")), envelope.Options{})
	if res.Outcome != consumer.OutcomeAck {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if s.key != "order-o-2" {
		t.Fatalf("key %q, want the publisher's sqsonce-id", s.key)
	}
	str := func(name string) string { return aws.ToString(s.attrs[name].StringValue) }
	if str("tenant") != "acme" || str("priority") != "5" || aws.ToString(s.attrs["priority"].DataType) != "Number" ||
		str("tags") != `["a","b"]` || string(s.attrs["blob"].BinaryValue) != "\x00\x01\x02\xff" {
		t.Fatalf("attributes %+v", s.attrs)
	}
}

func TestEventBridge(t *testing.T) {
	res, s := run(t, consumertest.NewMessage(fixture(t, "eventbridge-event.json")), envelope.Options{})
	if res.Outcome != consumer.OutcomeAck {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
	if s.body != `{"instance-id": "i-1234567890abcdef0", "state": "terminated"}` || s.key != "6a7e8feb-b491-4cf7-a9f1-bf3703467718" {
		t.Fatalf("body %q key %q", s.body, s.key)
	}
	if s.env.Kind != envelope.EventBridge || s.env.Source != "aws.ec2" || s.env.DetailType != "EC2 Instance State-change Notification" {
		t.Fatalf("envelope %+v", s.env)
	}
}

// With raw message delivery the body and attributes arrive as they were
// published: nothing to unwrap, and the key is the sqsonce-id attribute.
func TestRawDeliveryPassesThrough(t *testing.T) {
	body := `{"order":"o-3"}`
	res, s := run(t, consumertest.NewMessage(body, consumertest.WithAttribute("sqsonce-id", "order-o-3")), envelope.Options{})
	if res.Outcome != consumer.OutcomeAck || s.body != body || s.key != "order-o-3" || s.env != nil {
		t.Fatalf("outcome %s, saw %+v", res.Outcome, s)
	}
	res, _ = run(t, consumertest.NewMessage(body), envelope.Options{Require: true})
	if res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrMalformed) {
		t.Fatalf("Require with a raw body: %s %v", res.Outcome, res.Err)
	}
}

func TestMalformedIsPermanentWithItsReason(t *testing.T) {
	for file, reason := range map[string]string{
		"bad-sns-no-message.json":        "without Message",
		"bad-sns-binary.json":            `binary attribute "b" is not base64`,
		"bad-eventbridge-no-detail.json": "without detail",
	} {
		t.Run(file, func(t *testing.T) {
			body := fixture(t, file)
			ran := false
			h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { ran = true; return nil })
			res := consumertest.Process(context.Background(), h, consumertest.NewMessage(body), envelope.Unwrap(envelope.Options{}))
			if ran || res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrMalformed) {
				t.Fatalf("ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
			}
			if !strings.Contains(res.Failure.Error, reason) {
				t.Fatalf("reason %q, want it to say %q", res.Failure.Error, reason)
			}
			if aws.ToString(res.DeadLetter.MessageBody) != body {
				t.Fatal("the dead letter must carry the body as it arrived")
			}
		})
	}
}

// A handler's permanent failure dead-letters the envelope as it arrived,
// with the publisher's id as sqsonce-id, so a redrive dedupes on it.
func TestDeadLetterKeepsEnvelope(t *testing.T) {
	body := fixture(t, "sns-notification.json")
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return consumer.Permanent(errors.New("no such order")) })
	res := consumertest.Process(context.Background(), h, consumertest.NewMessage(body), envelope.Unwrap(envelope.Options{}))
	if res.Outcome != consumer.OutcomeDeadLetter || aws.ToString(res.DeadLetter.MessageBody) != body {
		t.Fatalf("outcome %s, dead letter body %q", res.Outcome, aws.ToString(res.DeadLetter.MessageBody))
	}
	if id := aws.ToString(res.DeadLetter.MessageAttributes[consumer.AttrID].StringValue); id != "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324" {
		t.Fatalf("dead letter sqsonce-id %q, want the SNS MessageId", id)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"sns-notification.json", "sns-with-attributes.json", "sns-subscription-confirmation.json", "eventbridge-event.json", "bad-sns-binary.json", "bad-eventbridge-no-detail.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(`{"Type":"Notification","TopicArn":"t","MessageId":"m","Message":""}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, body string) {
		env, inner, attrs, err := envelope.Parse(body)
		_, _ = envelope.StringToSignForTest(body) // must not panic
		switch {
		case err != nil:
			if env != nil || !errors.Is(err, envelope.ErrMalformed) {
				t.Fatalf("error %v with envelope %+v", err, env)
			}
		case env != nil:
			if env.ID == "" || attrs == nil {
				t.Fatalf("envelope %+v without id or attributes", env)
			}
			_ = inner
		}
	})
}

// On the local stack: the same SNS notification delivered twice (SNS
// retried its delivery to SQS) is applied once, with dedupe keyed on the
// SNS MessageId.
func TestDuplicateNotificationAppliedOnce(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	body := fixture(t, "sns-notification.json")
	for range 2 {
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	var runs, settled atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dd, err := dedupe.New(dedupe.Config{Store: dedupe.NewMemory(dedupe.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(consumer.Config{
		Client:   client,
		QueueURL: queueURL,
		Middleware: []consumer.Middleware{
			envelope.Unwrap(envelope.Options{}),
			dd.Wrap,
		},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			if envelope.FromContext(ctx) == nil || !strings.Contains(m.Body, "o-1") {
				return consumer.Permanent(fmt.Errorf("handler saw an unwrapped body"))
			}
			runs.Add(1)
			return nil
		}),
		Observer: settleCounter{n: &settled},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for settled.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if settled.Load() != 2 || runs.Load() != 1 {
		t.Fatalf("settled %d, handler ran %d times; want 2 settled and 1 run", settled.Load(), runs.Load())
	}
}

type settleCounter struct {
	consumer.NopObserver
	n *atomic.Int64
}

func (s settleCounter) Settled(*consumer.Message, consumer.Result) { s.n.Add(1) }
