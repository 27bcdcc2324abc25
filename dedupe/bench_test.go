package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/delivery"
)

// BenchmarkMiddleware: the dedupe middleware over the in-memory store,
// per message: a new key (claim, handler, complete) and a duplicate of a
// completed key (claim answers duplicate, handler not run).
func BenchmarkMiddleware(b *testing.B) {
	ok := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	newMsg := func(key string) *consumer.Message {
		return delivery.New(types.Message{
			MessageId: aws.String("m-" + key), ReceiptHandle: aws.String("h-" + key), Body: aws.String(`{"order":"` + key + `"}`),
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
			MessageAttributes: map[string]types.MessageAttributeValue{
				consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(key)},
			},
		}, "https://sqs.test/123456789012/q", time.Now())
	}
	ctx := context.Background()

	b.Run("new_key", func(b *testing.B) {
		store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "bench"})
		h := wrap(b, store, dedupe.Config{})(ok)
		msgs := make([]*consumer.Message, 1<<14)
		for i := range msgs {
			msgs[i] = newMsg("k" + strconv.Itoa(i))
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%len(msgs) == 0 && i > 0 {
				// Every key of the set is now completed: start a fresh store.
				b.StopTimer()
				store = dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "bench"})
				h = wrap(b, store, dedupe.Config{})(ok)
				b.StartTimer()
			}
			if err := h.Handle(ctx, msgs[i%len(msgs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})

	b.Run("duplicate", func(b *testing.B) {
		store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "bench"})
		h := wrap(b, store, dedupe.Config{})(ok)
		msg := newMsg("done")
		if err := h.Handle(ctx, msg); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := h.Handle(ctx, msg); !errors.Is(err, consumer.ErrDuplicate) {
				b.Fatalf("Handle = %v, want ErrDuplicate", err)
			}
		}
	})
}
