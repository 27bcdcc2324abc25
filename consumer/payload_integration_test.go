package consumer_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/payload/payloadtest"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/producer"
)

// bodies collects what a handler saw, by sqsonce-id (or MessageId).
type bodies struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (b *bodies) add(m *consumer.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string][]string{}
	}
	b.seen[m.Key()] = append(b.seen[m.Key()], m.Body)
}

func (b *bodies) get(key string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen[key]...)
}

// runPayloadConsumer consumes queueURL until stop is called.
func runPayloadConsumer(t *testing.T, sq *sqs.Client, s3c *s3.Client, queueURL string, seen *bodies) (stop func()) {
	t.Helper()
	c, err := consumer.New(consumer.Config{
		Client: sq, QueueURL: queueURL, WaitTime: time.Second, FlushInterval: 10 * time.Millisecond,
		Payload: consumer.PayloadConfig{S3Client: s3c},
		Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			seen.add(m)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// TestPayloadRoundTripOnStack: on the local stack (fauxqs serving S3),
// a 2 MiB body and a compressed body go producer → SQS (+ S3) →
// consumer, and the handler sees each once, as sent; the 2 MiB body
// left one object in the bucket.
func TestPayloadRoundTripOnStack(t *testing.T) {
	sq := testenv.SQS(t)
	s3c := testenv.S3(t)
	bucket := testenv.Bucket(t, s3c, "payload")
	q, _ := testenv.QueueWithDLQ(t, sq, "payload", testenv.QueueOptions{VisibilityTimeout: 30})
	p, err := producer.New(producer.Config{Client: sq, QueueURL: q, Payload: producer.PayloadConfig{
		S3Client: s3c, Bucket: bucket, KeyPrefix: "test/", CompressAbove: 1024,
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Random text: it does not shrink below 1 MiB, so it is stored
	// (compressed as far as it goes).
	big := randomBody(2 << 20)
	compressible := strings.Repeat(`{"account":"acct-001","amount":42,"memo":"repeat"}`, 2000)
	ctx := context.Background()
	res := p.SendBatch(ctx, []producer.Message{{ID: "big", Body: big}, {ID: "zstd", Body: compressible}, {ID: "plain", Body: "small"}})
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("send %s: %v", r.ID, r.Err)
		}
	}
	if keys := testenv.Objects(t, s3c, bucket); len(keys) != 1 || !strings.HasPrefix(keys[0], "test/") {
		t.Fatalf("objects %v, want one under test/", keys)
	}
	var seen bodies
	stop := runPayloadConsumer(t, sq, s3c, q, &seen)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && (len(seen.get("big")) == 0 || len(seen.get("zstd")) == 0 || len(seen.get("plain")) == 0) {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	for id, want := range map[string]string{"big": big, "zstd": compressible, "plain": "small"} {
		got := seen.get(id)
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: the handler saw %d bodies (equal to the sent one: %v), want it once", id, len(got), len(got) == 1 && got[0] == want)
		}
	}
	if visible, inFlight := testenv.Count(t, sq, q); visible+inFlight != 0 {
		t.Errorf("%d messages left on the queue", visible+inFlight)
	}
}

// TestPayloadJavaFixtureOnStack: messages exactly as AWS's Java and
// Python extended clients write them (the golden fixtures), their
// objects put in S3 as those clients put them, are consumed by sqsonce:
// the handler sees the stored body.
func TestPayloadJavaFixtureOnStack(t *testing.T) {
	sq := testenv.SQS(t)
	s3c := testenv.S3(t)
	bucket := testenv.Bucket(t, s3c, "fixtures")
	q, _ := testenv.QueueWithDLQ(t, sq, "fixtures", testenv.QueueOptions{VisibilityTimeout: 30})
	fx, err := payloadtest.Fixtures()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]string{}
	for _, f := range fx {
		body := strings.ReplaceAll(f.Body, f.Object.Bucket, bucket) // the fixture's bucket, renamed for the test
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(f.Object.Key),
			Body: strings.NewReader(f.Object.Content), ContentType: aws.String("text/plain; charset=UTF-8")}); err != nil {
			t.Fatalf("%s: put object: %v", f.Name, err)
		}
		out, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body), MessageAttributes: f.SQSAttributes()})
		if err != nil {
			t.Fatalf("%s: send: %v", f.Name, err)
		}
		want[aws.ToString(out.MessageId)] = f.Object.Content
	}
	var seen bodies
	stop := runPayloadConsumer(t, sq, s3c, q, &seen)
	deadline := time.Now().Add(30 * time.Second)
	done := func() bool {
		for id := range want {
			if len(seen.get(id)) == 0 {
				return false
			}
		}
		return true
	}
	for time.Now().Before(deadline) && !done() {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	for id, content := range want {
		if got := seen.get(id); len(got) != 1 || got[0] != content {
			t.Errorf("message %s: the handler saw %q, want %q once", id, got, content)
		}
	}
}

// TestPayloadMissingObjectOnStack: a pointer to an object that is not
// there goes to the DLQ at once, class payload, the reason naming the
// object, with its pointer and attributes as sent.
func TestPayloadMissingObjectOnStack(t *testing.T) {
	sq := testenv.SQS(t)
	s3c := testenv.S3(t)
	bucket := testenv.Bucket(t, s3c, "missing")
	q, dlq := testenv.QueueWithDLQ(t, sq, "missing", testenv.QueueOptions{VisibilityTimeout: 30})
	ptr := payload.Pointer{Bucket: bucket, Key: "no-such-object"}
	ctx := context.Background()
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(ptr.Body()),
		MessageAttributes: map[string]types.MessageAttributeValue{payload.AttrSize: payload.NumberAttr(100), deadletter.AttrID: payload.StringAttr("missing-1")}}); err != nil {
		t.Fatal(err)
	}
	var seen bodies
	stop := runPayloadConsumer(t, sq, s3c, q, &seen)
	got := testenv.Receive(t, sq, dlq, 1, true)
	stop()
	if n := len(seen.get("missing-1")); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
	if len(got) != 1 || aws.ToString(got[0].Body) != ptr.Body() {
		t.Fatalf("DLQ got %+v, want the pointer unchanged", got)
	}
	var f deadletter.Failure
	if err := json.Unmarshal([]byte(aws.ToString(got[0].MessageAttributes[deadletter.AttrFailure].StringValue)), &f); err != nil {
		t.Fatal(err)
	}
	if f.Class != consumer.ClassPayload || !strings.Contains(f.Error, ptr.String()) || f.Attempts != 1 {
		t.Errorf("failure %+v, want class payload naming %s after 1 attempt", f, ptr)
	}
	if got[0].MessageAttributes[payload.AttrSize].StringValue == nil {
		t.Errorf("the dead letter lost ExtendedPayloadSize: %v", got[0].MessageAttributes)
	}
}

// randomBody is n bytes of text that compresses poorly.
func randomBody(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	x := uint64(88172645463325252)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x%uint64(len(alphabet))]
	}
	return string(b)
}
