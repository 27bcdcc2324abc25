package consumer_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
)

// withFailure is a received dead letter carrying attr as its
// sqsonce-failure attribute.
func withFailure(attr string) *consumer.Message {
	return consumer.NewMessage(types.Message{
		MessageId: aws.String("m"),
		Body:      aws.String("{}"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			consumer.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(attr)},
		},
	}, "https://sqs.example/dlq", time.Now())
}

// FuzzParseFailure: whatever a dead letter's sqsonce-failure attribute
// holds, ParseFailure does not panic; what it accepts is JSON, writes back
// (as the redrive tool and the consumer rewrite it), and reads again the
// same.
func FuzzParseFailure(f *testing.F) {
	real, _ := json.Marshal(consumer.Failure{
		Error: "permanent: not an order: order_id is missing", Class: consumer.ClassPermanent,
		SourceQueue: "https://sqs.us-east-1.amazonaws.com/123456789012/orders", Attempts: 1,
		OriginalMessageID: "059f36b4-87a3-44ab-83d2-661975830a7d", FailedAt: time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC),
	})
	for _, s := range []string{
		string(real),
		`{"error":"dedupe: key \"k\" reused","class":"key_reuse","source_queue":"https://sqs.eu-west-1.amazonaws.com/1/q.fifo","attempts":5,"original_message_id":"x","failed_at":"2026-01-02T03:04:05+01:00"}`,
		`{"class":"max_attempts","attempts":-1}`,
		`{"failed_at":"not a time"}`,
		`{"failed_at":"10000-01-01T00:00:00Z"}`,
		`{"attempts":1e3}`,
		`null`, `[]`, `{}`, `""`, "not json", "",
		`{"error":"\u0000\ud800","class":"` + strings.Repeat("x", 300) + `"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, attr string) {
		got, ok := consumer.ParseFailure(withFailure(attr))
		if !ok {
			if got != (consumer.Failure{}) {
				t.Fatalf("ParseFailure(%q) = %+v, false; want the zero Failure", attr, got)
			}
			return
		}
		if attr == "" || !json.Valid([]byte(attr)) {
			t.Fatalf("ParseFailure accepted %q, which is not JSON", attr)
		}
		again, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("ParseFailure(%q) = %+v, which does not marshal: %v", attr, got, err)
		}
		back, ok := consumer.ParseFailure(withFailure(string(again)))
		if !ok || !sameFailure(back, got) {
			t.Fatalf("rewritten %s reads as %+v, %v; want %+v", again, back, ok, got)
		}
	})
}

// FuzzDeadLetterFailure: the failure DeadLetterInput writes into a dead
// letter reads back with ParseFailure: the reason (bounded), the class,
// the source queue, the attempts and the original message id.
func FuzzDeadLetterFailure(f *testing.F) {
	f.Add("not an order: order_id is missing", uint16(0), "", "https://sqs.us-east-1.amazonaws.com/123456789012/orders", "059f36b4-87a3", "3", int64(1764504000123))
	f.Add("aé", uint16(700), consumer.ClassMaxAttempts, "q", "", "x", int64(0)) // cut inside a rune
	f.Add("<html>&\x00\x01", uint16(2), consumer.ClassKeyReuse, "https://sqs.example/q.fifo", "m", "-2", int64(-1))
	f.Fuzz(func(t *testing.T, part string, repeat uint16, class, source, id, receiveCount string, ms int64) {
		// Long reasons from short inputs, which the fuzzer mutates faster.
		n := int(repeat%1024) + 1
		if len(part)*n > 1<<16 {
			return
		}
		reason := strings.Repeat(part, n)
		// The consumer's clock: years 0 to 9999, which JSON can hold.
		ms %= 253402300799999
		if ms < 0 {
			ms = -ms
		}
		now := time.UnixMilli(ms).UTC()
		msg := consumer.NewMessage(types.Message{
			MessageId:  aws.String(id),
			Body:       aws.String("{}"),
			Attributes: map[string]string{"ApproximateReceiveCount": receiveCount},
		}, source, now)
		in := consumer.DeadLetterInput(msg, consumer.Result{Err: errors.New(reason), Class: class}, source, "https://sqs.example/dlq", false, now)
		dl := consumer.NewMessage(types.Message{MessageId: aws.String("dl"), Body: in.MessageBody, MessageAttributes: in.MessageAttributes}, "https://sqs.example/dlq", now)
		got, ok := consumer.ParseFailure(dl)
		if !ok {
			t.Fatalf("dead letter's failure %q does not parse", dl.Attribute(consumer.AttrFailure))
		}
		wantClass := class
		if wantClass == "" {
			wantClass = consumer.ClassPermanent
		}
		count, _ := strconv.Atoi(receiveCount)
		if got.Attempts != max(count, 1) || !got.FailedAt.Equal(now) {
			t.Fatalf("failure %+v; want %d attempts, failed at %s", got, max(count, 1), now)
		}
		if !utf8.ValidString(reason) || !utf8.ValidString(class) || !utf8.ValidString(source) || !utf8.ValidString(id) {
			return // JSON keeps valid UTF-8 only; the rest is replaced
		}
		if got.Class != wantClass || got.SourceQueue != source || got.OriginalMessageID != id {
			t.Fatalf("failure %+v; want class %q, source %q, id %q", got, wantClass, source, id)
		}
		if reason == "" {
			return // the reason of a nil-message error is empty
		}
		// Up to 2048 bytes the reason is kept whole; a longer one is cut
		// at the last rune boundary within them and marked.
		want := reason
		if len(reason) > 2048 {
			k := 2048
			for k > 0 && !utf8.RuneStart(reason[k]) {
				k--
			}
			want = reason[:k] + "…"
		}
		if got.Error != want {
			t.Fatalf("failure reason %q (%d bytes), want %q", got.Error, len(got.Error), want)
		}
	})
}

func sameFailure(a, b consumer.Failure) bool {
	return a.Error == b.Error && a.Class == b.Class && a.SourceQueue == b.SourceQueue && a.Attempts == b.Attempts &&
		a.OriginalMessageID == b.OriginalMessageID && a.FailedAt.Equal(b.FailedAt)
}
