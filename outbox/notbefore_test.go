package outbox_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/producer"
)

// TestRelaySendsNotBefore: an event's NotBefore goes out with its
// message, as the producer sends one (delayed 15 minutes, the time in
// sqsonce-not-before); one beyond the queue's retention is parked with
// the reason, holding back its entity only.
func TestRelaySendsNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		url := f.AddQueue("events", map[string]string{"MessageRetentionPeriod": "86400"}) // 1 day
		store := outbox.NewMemory(outbox.MemoryConfig{})
		ctx, cancel := context.WithCancel(context.Background())
		due := time.Now().Add(3 * time.Hour)
		if err := store.Put(ctx,
			outbox.Event{ID: "later", Entity: "a", Payload: "credit later", NotBefore: due},
			outbox.Event{ID: "too-late", Entity: "b", Payload: "credit in a week", NotBefore: time.Now().Add(7 * 24 * time.Hour)},
			outbox.Event{ID: "now", Entity: "c", Payload: "credit now"},
		); err != nil {
			t.Fatal(err)
		}
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: f, QueueURL: url})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		time.Sleep(time.Second)
		cancel()
		<-done

		sent := map[string]sqsfake.Sent{}
		for _, s := range f.Sent(url) {
			sent[s.Body] = s
		}
		if len(sent) != 2 {
			t.Fatalf("sent %d messages, want 2", len(sent))
		}
		later := sent["credit later"]
		if later.DelaySeconds != 900 || aws.ToString(later.Attributes[producer.AttrNotBefore].StringValue) != (hold.Mark{NotBefore: due}).Value() {
			t.Errorf("the delayed event went with DelaySeconds %d and %s %q", later.DelaySeconds, producer.AttrNotBefore, aws.ToString(later.Attributes[producer.AttrNotBefore].StringValue))
		}
		if now := sent["credit now"]; now.DelaySeconds != 0 || now.Attributes[producer.AttrNotBefore].StringValue != nil {
			t.Errorf("the event without NotBefore went with DelaySeconds %d and attributes %v", now.DelaySeconds, now.Attributes)
		}
		st, err := store.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Dead != 1 || st.DeadEvents[0].ID != "too-late" || !strings.Contains(st.DeadEvents[0].LastError, "MessageRetentionPeriod") {
			t.Errorf("stats %+v, want too-late parked for the queue's retention", st)
		}
	})
}
