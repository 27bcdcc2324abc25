package outbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/payload/payloadtest"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/producer"
)

// An event over the queue's MaximumMessageSize, parked without Payload
// (TestRelayParksPoisonEventsAtOnce), is published through S3 with it.
func TestRelayStoresLargeEventsInS3(t *testing.T) {
	ctx := context.Background()
	fake := sqsfake.New()
	url := fake.AddQueue("small", map[string]string{"MaximumMessageSize": "1024"})
	store := outbox.NewMemory(outbox.MemoryConfig{})
	big := outbox.Event{ID: "big", Entity: "x", Payload: strings.Repeat("p", 2000)}
	if err := store.Put(ctx, big); err != nil {
		t.Fatal(err)
	}
	s3 := &payloadtest.S3{}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: fake, QueueURL: url,
		Payload: producer.PayloadConfig{S3Client: s3, Bucket: "events"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	sent := fake.Sent(url)
	if len(sent) != 1 {
		t.Fatalf("%d messages sent, want 1", len(sent))
	}
	res, err := payload.Decoder{S3: s3}.Decode(ctx, sent[0].Body, sent[0].Attributes)
	if err != nil || res.Body != big.Payload || res.Pointer == nil {
		t.Fatalf("the sent message decodes to %d bytes (%v), pointer %v; want the event's payload from S3", len(res.Body), err, res.Pointer)
	}
	if s, _ := store.Stats(ctx); s.Dead != 0 || s.Pending != 0 {
		t.Errorf("stats %+v, want the event published", s)
	}
}
