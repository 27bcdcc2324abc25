package settle_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// TestFitDeadLetter: the reason is cut before any attribute is dropped;
// attributes go by the documented rule; the body is never changed.
func TestFitDeadLetter(t *testing.T) {
	t.Parallel()
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	msg := settle.Message{ID: "m-1", Body: strings.Repeat("b", 500), Attributes: map[string]types.MessageAttributeValue{
		"alpha": str(strings.Repeat("a", 50)), "zulu": str(strings.Repeat("z", 50)), "sqsonce-trace": str("t"),
	}}
	reason := strings.Repeat("é", 1500)
	build := func() int {
		in := settle.DeadLetterInput(msg, reason, "", "https://sqs.test/1/q", "https://sqs.test/1/dlq", false, time.Unix(0, 0))
		dropped, fits := settle.FitDeadLetter(in, 0)
		if !fits || len(dropped) != 0 || size(in.MessageBody, in.MessageAttributes) < 2000 {
			t.Fatalf("at SQS's own limit: dropped %v, fits %v", dropped, fits)
		}
		return size(in.MessageBody, in.MessageAttributes)
	}
	full := build()
	for _, tc := range []struct {
		max     int
		dropped string
		fits    bool
	}{
		{full, "", true},
		{1100, "", true},                         // the reason cut to 256 bytes is enough
		{900, "", true},                          // the reason cut to 64 bytes
		{850, "zulu", true},                      // then the names that sort last go first
		{790, "zulu,alpha", true},                // ...
		{760, "zulu,alpha,sqsonce-trace", true},  // other sqsonce-* names last
		{700, "zulu,alpha,sqsonce-trace", false}, // sqsonce-id and sqsonce-failure stay
	} {
		in := settle.DeadLetterInput(msg, reason, "", "https://sqs.test/1/q", "https://sqs.test/1/dlq", false, time.Unix(0, 0))
		dropped, fits := settle.FitDeadLetter(in, tc.max)
		got := size(in.MessageBody, in.MessageAttributes)
		if strings.Join(dropped, ",") != tc.dropped || fits != tc.fits || (fits && got > tc.max) {
			t.Errorf("max %d: dropped %v, fits %v, %d bytes; want dropped %q, fits %v", tc.max, dropped, fits, got, tc.dropped, tc.fits)
		}
		if aws.ToString(in.MessageBody) != msg.Body || in.MessageAttributes[deadletter.AttrID].StringValue == nil {
			t.Errorf("max %d: body or %s changed", tc.max, deadletter.AttrID)
		}
		f, ok := deadletter.ParseFailure(in.MessageAttributes)
		if !ok || !strings.HasPrefix(f.Error, "permanent: ééé") && !strings.HasPrefix(f.Error, "ééé") {
			t.Errorf("max %d: failure %+v not valid (ok %v)", tc.max, f, ok)
		}
	}
}

func size(body *string, attrs map[string]types.MessageAttributeValue) int {
	n := len(aws.ToString(body))
	for name, v := range attrs {
		n += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

func TestDeadLetterInput(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}

	t.Run("standard", func(t *testing.T) {
		m := settle.Message{ID: "mid", Body: "body", ReceiveCount: 1, Attributes: map[string]types.MessageAttributeValue{"a": str("1")}}
		in := settle.DeadLetterInput(m, "bad", deadletter.ClassPermanent, "src", "dlq", false, now)
		if aws.ToString(in.QueueUrl) != "dlq" || aws.ToString(in.MessageBody) != "body" || in.MessageGroupId != nil || in.MessageDeduplicationId != nil {
			t.Errorf("input %+v", in)
		}
		if len(in.MessageAttributes) != 3 || aws.ToString(in.MessageAttributes["a"].StringValue) != "1" || aws.ToString(in.MessageAttributes[deadletter.AttrID].StringValue) != "mid" {
			t.Errorf("attributes %v", in.MessageAttributes)
		}
		var f deadletter.Failure
		if err := json.Unmarshal([]byte(aws.ToString(in.MessageAttributes[deadletter.AttrFailure].StringValue)), &f); err != nil {
			t.Fatal(err)
		}
		want := deadletter.Failure{Error: "bad", Class: "permanent", SourceQueue: "src", Attempts: 1, OriginalMessageID: "mid", FailedAt: now}
		if f != want {
			t.Errorf("failure %+v, want %+v", f, want)
		}
	})
	t.Run("fifo keeps group, dedupes on the original id, keeps sqsonce-id", func(t *testing.T) {
		m := settle.Message{ID: "mid", Body: "body", GroupID: "g1", ReceiveCount: 1, Attributes: map[string]types.MessageAttributeValue{deadletter.AttrID: str("job-1")}}
		in := settle.DeadLetterInput(m, "bad", deadletter.ClassPermanent, "src.fifo", "dlq.fifo", true, now)
		if aws.ToString(in.MessageGroupId) != "g1" || aws.ToString(in.MessageDeduplicationId) != "mid" {
			t.Errorf("group %q dedup %q", aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId))
		}
		if aws.ToString(in.MessageAttributes[deadletter.AttrID].StringValue) != "job-1" {
			t.Errorf("sqsonce-id %v", in.MessageAttributes[deadletter.AttrID])
		}
	})
	t.Run("ten attributes already", func(t *testing.T) {
		m := settle.Message{ID: "mid", Body: "body", Attributes: map[string]types.MessageAttributeValue{}}
		for i := range 10 {
			m.Attributes[fmt.Sprintf("attr%02d", i)] = str("v")
		}
		in := settle.DeadLetterInput(m, "bad", deadletter.ClassPermanent, "src", "dlq", false, now)
		if len(in.MessageAttributes) != sqslimits.MaxMessageAttributes {
			t.Fatalf("%d attributes, want %d", len(in.MessageAttributes), sqslimits.MaxMessageAttributes)
		}
		for _, name := range []string{deadletter.AttrID, deadletter.AttrFailure, "attr00", "attr07"} {
			if _, ok := in.MessageAttributes[name]; !ok {
				t.Errorf("%s dropped", name)
			}
		}
		if got := settle.DroppedAttributes(m.Attributes); strings.Join(got, ",") != "attr09,attr08" {
			t.Errorf("DroppedAttributes = %v, want [attr09 attr08]", got)
		}
	})
	t.Run("a second dead-lettering replaces the failure", func(t *testing.T) {
		m := settle.Message{ID: "mid", Body: "body", Attributes: map[string]types.MessageAttributeValue{deadletter.AttrFailure: str(`{"class":"old"}`), deadletter.AttrID: str("k")}}
		in := settle.DeadLetterInput(m, "bad", deadletter.ClassPermanent, "src", "dlq", false, now)
		if len(in.MessageAttributes) != 2 || !strings.Contains(aws.ToString(in.MessageAttributes[deadletter.AttrFailure].StringValue), `"permanent"`) {
			t.Errorf("attributes %v", in.MessageAttributes)
		}
	})
}

func FuzzDeadLetterInput(f *testing.F) {
	f.Add("body", "err", 3, "name")
	f.Add("", "", 11, "sqsonce-x")
	f.Fuzz(func(t *testing.T, body, errText string, nAttrs int, name string) {
		m := settle.Message{ID: "m", Body: body, Attributes: map[string]types.MessageAttributeValue{}}
		for i := range nAttrs % 12 {
			m.Attributes[fmt.Sprintf("%s%d", name, i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
		}
		in := settle.DeadLetterInput(m, errText, "", "s", "d", false, time.Now())
		if len(in.MessageAttributes) > sqslimits.MaxMessageAttributes {
			t.Fatalf("%d attributes", len(in.MessageAttributes))
		}
		if _, ok := in.MessageAttributes[deadletter.AttrFailure]; !ok {
			t.Fatal("no failure attribute")
		}
		if aws.ToString(in.MessageAttributes[deadletter.AttrID].StringValue) == "" {
			t.Fatal("no id")
		}
		if aws.ToString(in.MessageBody) != body {
			t.Fatal("body changed")
		}
	})
}

// FuzzDeadLetterFailure: the failure DeadLetterInput writes into a dead
// letter reads back with ParseFailure: the reason (bounded), the class,
// the source queue, the attempts and the original message id.
func FuzzDeadLetterFailure(f *testing.F) {
	f.Add("not an order: order_id is missing", uint16(0), "", "https://sqs.us-east-1.amazonaws.com/123456789012/orders", "059f36b4-87a3", "3", int64(1764504000123))
	f.Add("aé", uint16(700), deadletter.ClassMaxAttempts, "q", "", "x", int64(0)) // cut inside a rune
	f.Add("<html>&\x00\x01", uint16(2), deadletter.ClassKeyReuse, "https://sqs.example/q.fifo", "m", "-2", int64(-1))
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
		count, _ := strconv.Atoi(receiveCount)
		msg := settle.Message{ID: id, Body: "{}", ReceiveCount: count}
		in := settle.DeadLetterInput(msg, reason, class, source, "https://sqs.example/dlq", false, now)
		got, ok := deadletter.ParseFailure(in.MessageAttributes)
		if !ok {
			t.Fatalf("dead letter's failure %q does not parse", aws.ToString(in.MessageAttributes[deadletter.AttrFailure].StringValue))
		}
		wantClass := class
		if wantClass == "" {
			wantClass = deadletter.ClassPermanent
		}
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
