package producer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/producer"
)

// TestNotBeforeSend: a message sent "not before T" is delayed by SQS for
// min(T-now, 15 minutes) and carries T in sqsonce-not-before, so that a
// consumer holds it until T; a T already past sends the message as a
// plain one.
func TestNotBeforeSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("delayed", map[string]string{"MessageRetentionPeriod": "345600"}) // 4 days
		p, err := producer.New(producer.Config{Client: f, QueueURL: q})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		far := now.Add(3*time.Hour + 250*time.Millisecond)
		near := now.Add(10*time.Minute + 100*time.Millisecond)
		res := p.SendBatch(context.Background(), []producer.Message{
			{ID: "far", Body: "far", NotBefore: far},
			{ID: "near", Body: "near", NotBefore: near},
			{ID: "past", Body: "past", NotBefore: now.Add(-time.Minute)},
		})
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("%s: %v", r.ID, r.Err)
			}
		}
		sent := map[string]sqsfake.Sent{}
		for _, s := range f.Sent(q) {
			sent[s.Body] = s
		}
		for _, c := range []struct {
			body  string
			delay int32
			at    time.Time
		}{
			{"far", 900, far},
			{"near", 601, near}, // rounded up: never visible before its time
		} {
			s := sent[c.body]
			if s.DelaySeconds != c.delay {
				t.Errorf("%s: DelaySeconds %d, want %d", c.body, s.DelaySeconds, c.delay)
			}
			v := aws.ToString(s.Attributes[producer.AttrNotBefore].StringValue)
			m, err := hold.Parse(v)
			if err != nil {
				t.Fatalf("%s: %s %q: %v", c.body, producer.AttrNotBefore, v, err)
			}
			if !m.NotBefore.Equal(c.at.Truncate(time.Millisecond)) || m.Hop != 0 || m.MessageID != "" {
				t.Errorf("%s: mark %+v, want not before %s on the first copy", c.body, m, c.at)
			}
			if got := aws.ToString(s.Attributes[producer.AttrNotBefore].DataType); got != "String" {
				t.Errorf("%s: data type %q", c.body, got)
			}
		}
		if s := sent["past"]; s.DelaySeconds != 0 || s.Attributes[producer.AttrNotBefore].StringValue != nil {
			t.Errorf("a NotBefore in the past was sent with delay %d and attributes %v", s.DelaySeconds, s.Attributes)
		}
	})
}

// TestNotBeforeRefused: what cannot be held is refused before sending,
// with an error that says why (and matches ErrInvalid, so that the outbox
// parks such an event instead of retrying it).
func TestNotBeforeRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		std := f.AddQueue("short", map[string]string{"MessageRetentionPeriod": "3600"}) // 1 hour
		fifo := f.AddQueue("orders.fifo", nil)
		ctx := context.Background()
		now := time.Now()
		send := func(url string, m producer.Message) error {
			t.Helper()
			p, err := producer.New(producer.Config{Client: f, QueueURL: url})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Send(ctx, m)
			return err
		}
		for _, c := range []struct {
			name string
			url  string
			m    producer.Message
			want string
			is   error
		}{
			{"FIFO", fifo, producer.Message{Body: "x", GroupID: "g", NotBefore: now.Add(time.Hour)}, "FIFO queues", producer.ErrInvalid},
			{"beyond retention", std, producer.Message{Body: "x", NotBefore: now.Add(2 * time.Hour)}, "MessageRetentionPeriod", producer.ErrBeyondRetention},
			{"at the end of retention", std, producer.Message{Body: "x", NotBefore: now.Add(time.Hour)}, "MessageRetentionPeriod", producer.ErrBeyondRetention},
			{"with a delay", std, producer.Message{Body: "x", NotBefore: now.Add(30 * time.Minute), Delay: time.Minute}, "Delay or NotBefore", producer.ErrInvalid},
			{"own attribute", std, producer.Message{Body: "x", Attributes: map[string]types.MessageAttributeValue{
				producer.AttrNotBefore: {DataType: aws.String("String"), StringValue: aws.String(now.Add(time.Hour).Format(time.RFC3339))},
			}}, "reserved", producer.ErrInvalid},
		} {
			err := send(c.url, c.m)
			if err == nil || !errors.Is(err, producer.ErrInvalid) || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want one matching ErrInvalid and %v, saying %q", c.name, err, c.is, c.want)
			}
		}
		if n := len(f.Sent(std)) + len(f.Sent(fifo)); n != 0 {
			t.Errorf("%d refused messages were sent", n)
		}
		// Within the retention, less the minute left for the receive, it goes.
		if err := send(std, producer.Message{Body: "x", NotBefore: now.Add(58 * time.Minute)}); err != nil {
			t.Errorf("a NotBefore within the retention: %v", err)
		}
	})
}

// TestNotBeforeKeepsRoomForItsCopies: a not-before message is sized with
// its attribute as a re-sent copy carries it (hold.MaxLen), so that every
// copy a consumer sends again fits in the queue.
func TestNotBeforeKeepsRoomForItsCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("small", map[string]string{"MaximumMessageSize": "2048"})
		p, err := producer.New(producer.Config{Client: f, QueueURL: q})
		if err != nil {
			t.Fatal(err)
		}
		idAttr := len(producer.AttrID) + len("String") + len("id")
		// Fits with the first copy's attribute, not with the longest.
		first := len(producer.AttrNotBefore) + len("String") + len("2006-01-02T15:04:05.000Z")
		body := strings.Repeat("a", 2048-idAttr-first)
		_, err = p.Send(context.Background(), producer.Message{ID: "id", Body: body, NotBefore: time.Now().Add(time.Hour)})
		if !errors.Is(err, producer.ErrTooLarge) {
			t.Fatalf("error %v, want ErrTooLarge", err)
		}
		body = strings.Repeat("a", 2048-idAttr-len(producer.AttrNotBefore)-len("String")-hold.MaxLen)
		if _, err := p.Send(context.Background(), producer.Message{ID: "id", Body: body, NotBefore: time.Now().Add(time.Hour)}); err != nil {
			t.Fatalf("a message with room for its copies' attribute: %v", err)
		}
	})
}
