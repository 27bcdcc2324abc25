package producer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/payload/payloadtest"
	"github.com/sqsonce/sqsonce/producer"
)

func payloadProducer(t *testing.T, s *stub, pc producer.PayloadConfig) *producer.Producer {
	t.Helper()
	p, err := producer.New(producer.Config{Client: s, QueueURL: "https://sqs.test/1/q", BackoffBase: time.Millisecond, BackoffMax: time.Millisecond, Payload: pc})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOffloadReadByExtendedClients sends a 2 MiB body: the producer
// stores it in S3 and sends a pointer that the ports of AWS's Java and
// Python extended clients read back as the body, with the message's own
// attributes; a small body goes as it is.
func TestOffloadReadByExtendedClients(t *testing.T) {
	s3 := &payloadtest.S3{}
	s := &stub{}
	p := payloadProducer(t, s, producer.PayloadConfig{S3Client: s3, Bucket: "sqsonce-payloads", KeyPrefix: "ledger/"})
	big := strings.Repeat("0123456789abcdef", 2<<20/16)
	res := p.SendBatch(context.Background(), []producer.Message{
		{ID: "big", Body: big, Attributes: map[string]types.MessageAttributeValue{"kind": payload.StringAttr("credit")}},
		{ID: "small", Body: "hello"},
	})
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.ID, r.Err)
		}
	}
	if s3.Puts != 1 || s3.Len() != 1 {
		t.Fatalf("%d puts, %d objects; want the big body stored once", s3.Puts, s3.Len())
	}
	var sent []types.SendMessageBatchRequestEntry
	for _, c := range s.calls {
		sent = append(sent, c.Entries...)
	}
	if len(sent) != 2 {
		t.Fatalf("%d entries sent", len(sent))
	}
	for _, e := range sent {
		if attr(e) == "small" {
			if aws.ToString(e.MessageBody) != "hello" || len(e.MessageAttributes) != 1 {
				t.Errorf("the small message changed: %q %v", aws.ToString(e.MessageBody), e.MessageAttributes)
			}
			continue
		}
		body := aws.ToString(e.MessageBody)
		if !strings.HasPrefix(body, `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"sqsonce-payloads","s3Key":"ledger/`) {
			t.Errorf("pointer body %s", body)
		}
		if v := e.MessageAttributes[producer.AttrPayloadSize]; aws.ToString(v.DataType) != "Number" || aws.ToString(v.StringValue) != "2097152" {
			t.Errorf("ExtendedPayloadSize = %s %s", aws.ToString(v.DataType), aws.ToString(v.StringValue))
		}
		for name, recv := range map[string]func(context.Context, payloadtest.GetAPI, string, map[string]types.MessageAttributeValue, string) (payloadtest.Received, error){
			"java": payloadtest.JavaReceive, "python": payloadtest.PythonReceive,
		} {
			r, err := recv(context.Background(), s3, body, e.MessageAttributes, "AQEBhandle==")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if r.Body != big {
				t.Errorf("%s reads %d bytes, want the 2 MiB body", name, len(r.Body))
			}
			if len(r.Attributes) != 2 || aws.ToString(r.Attributes["kind"].StringValue) != "credit" || aws.ToString(r.Attributes[producer.AttrID].StringValue) != "big" {
				t.Errorf("%s sees attributes %v", name, r.Attributes)
			}
		}
		// The libraries refuse more than 9 attributes of a sender's own
		// when they store a body; sqsonce's message, resent by them,
		// would pass: sqsonce-id and kind.
		if _, _, err := payloadtest.JavaSend(big, map[string]types.MessageAttributeValue{"kind": {}, producer.AttrID: {}}, "b", "k", false); err != nil {
			t.Error(err)
		}
	}
}

func TestOffloadThresholdAndFailures(t *testing.T) {
	t.Run("lower threshold", func(t *testing.T) {
		s3 := &payloadtest.S3{}
		p := payloadProducer(t, &stub{}, producer.PayloadConfig{S3Client: s3, Bucket: "bkt", OffloadAbove: 1000})
		if _, err := p.Send(context.Background(), producer.Message{Body: strings.Repeat("x", 1001)}); err != nil {
			t.Fatal(err)
		}
		if s3.Len() != 1 {
			t.Errorf("a message over OffloadAbove was not stored (%d objects)", s3.Len())
		}
	})
	t.Run("store fails", func(t *testing.T) {
		s := &stub{}
		p := payloadProducer(t, s, producer.PayloadConfig{S3Client: failingS3{}, Bucket: "bkt"})
		_, err := p.Send(context.Background(), producer.Message{Body: strings.Repeat("x", 2<<20)})
		if err == nil || errors.Is(err, producer.ErrInvalid) || len(s.calls) != 0 {
			t.Errorf("Send = %v after %d calls; want the store's error, retriable, and nothing sent", err, len(s.calls))
		}
	})
	t.Run("no room for the size attribute", func(t *testing.T) {
		attrs := map[string]types.MessageAttributeValue{}
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
			attrs[n] = payload.StringAttr("v")
		}
		s3 := &payloadtest.S3{}
		p := payloadProducer(t, &stub{}, producer.PayloadConfig{S3Client: s3, Bucket: "bkt"})
		_, err := p.Send(context.Background(), producer.Message{Body: strings.Repeat("x", 2<<20), Attributes: attrs})
		if !errors.Is(err, producer.ErrTooLarge) {
			t.Errorf("Send = %v, want ErrTooLarge", err)
		}
	})
	t.Run("reserved attribute", func(t *testing.T) {
		p := payloadProducer(t, &stub{}, producer.PayloadConfig{})
		_, err := p.Send(context.Background(), producer.Message{Body: "x", Attributes: map[string]types.MessageAttributeValue{"ExtendedPayloadSize": payload.NumberAttr(1)}})
		if !errors.Is(err, producer.ErrInvalid) || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("Send = %v, want ErrInvalid: reserved", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		for _, pc := range []producer.PayloadConfig{
			{Bucket: "bkt"},
			{S3Client: &payloadtest.S3{}},
			{S3Client: &payloadtest.S3{}, Bucket: "Bad_Bucket"},
			{S3Client: &payloadtest.S3{}, Bucket: "bkt", KeyPrefix: "/abs"},
			{CompressAbove: -1},
		} {
			if _, err := producer.New(producer.Config{Client: &stub{}, QueueURL: "q", Payload: pc}); err == nil {
				t.Errorf("New accepted %+v", pc)
			}
		}
	})
}

// TestCompress: a body above CompressAbove goes compressed and marked;
// one that does not shrink goes as it is.
func TestCompress(t *testing.T) {
	s := &stub{}
	p := payloadProducer(t, s, producer.PayloadConfig{CompressAbove: 100})
	body := strings.Repeat(`{"account":"acct-001","amount":42}`, 100)
	if _, err := p.Send(context.Background(), producer.Message{Body: body}); err != nil {
		t.Fatal(err)
	}
	e := s.calls[0].Entries[0]
	if aws.ToString(e.MessageAttributes[producer.AttrEncoding].StringValue) != "zstd" || len(aws.ToString(e.MessageBody)) >= len(body) {
		t.Fatalf("sent %d bytes with attributes %v", len(aws.ToString(e.MessageBody)), e.MessageAttributes)
	}
	got, err := payload.Decompress(aws.ToString(e.MessageBody), 0)
	if err != nil || got != body {
		t.Fatalf("decompressed: %v, equal %v", err, got == body)
	}
	// A body too large even compressed goes to S3 compressed.
	s3 := &payloadtest.S3{}
	s2 := &stub{maxSize: "1024"}
	p2 := payloadProducer(t, s2, producer.PayloadConfig{CompressAbove: 100, S3Client: s3, Bucket: "bkt"})
	random := strings.Repeat("x", 100) + randomText(4000)
	if _, err := p2.Send(context.Background(), producer.Message{Body: random}); err != nil {
		t.Fatal(err)
	}
	e = s2.calls[0].Entries[0]
	if s3.Len() != 1 || e.MessageAttributes[producer.AttrPayloadSize].StringValue == nil {
		t.Fatalf("%d objects; attributes %v", s3.Len(), e.MessageAttributes)
	}
	res, err := payload.Decoder{S3: s3}.Decode(context.Background(), aws.ToString(e.MessageBody), e.MessageAttributes)
	if err != nil || res.Body != random {
		t.Fatalf("decoded: %v, equal %v", err, res.Body == random)
	}
}

// randomText is n characters that compress poorly.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = alphabet[x%uint32(len(alphabet))]
	}
	return string(b)
}

type failingS3 struct{}

func (failingS3) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return nil, payloadtest.Throttled
}
