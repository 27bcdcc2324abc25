package deadletter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
)

// withFailure is the attributes of a received dead letter carrying attr
// as its sqsonce-failure attribute.
func withFailure(attr string) map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{
		deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(attr)},
	}
}

// FuzzParseFailure: whatever a dead letter's sqsonce-failure attribute
// holds, ParseFailure does not panic; what it accepts is JSON, writes back
// (as the redrive tool and the consumer rewrite it), and reads again the
// same.
func FuzzParseFailure(f *testing.F) {
	real, _ := json.Marshal(deadletter.Failure{
		Error: "permanent: not an order: order_id is missing", Class: deadletter.ClassPermanent,
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
		got, ok := deadletter.ParseFailure(withFailure(attr))
		if !ok {
			if got != (deadletter.Failure{}) {
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
		back, ok := deadletter.ParseFailure(withFailure(string(again)))
		if !ok || !sameFailure(back, got) {
			t.Fatalf("rewritten %s reads as %+v, %v; want %+v", again, back, ok, got)
		}
	})
}

func sameFailure(a, b deadletter.Failure) bool {
	return a.Error == b.Error && a.Class == b.Class && a.SourceQueue == b.SourceQueue && a.Attempts == b.Attempts &&
		a.OriginalMessageID == b.OriginalMessageID && a.FailedAt.Equal(b.FailedAt) && a.Signature == b.Signature
}
