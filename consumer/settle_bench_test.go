package consumer

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
)

// nopSettleSQS acknowledges every batch entry at once.
type nopSettleSQS struct {
	SQSAPI // nil: other calls panic
	calls  atomic.Int64
}

func (f *nopSettleSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.calls.Add(1)
	ok := make([]types.DeleteMessageBatchResultEntry, len(in.Entries))
	for i, e := range in.Entries {
		ok[i].Id = e.Id
	}
	return &sqs.DeleteMessageBatchOutput{Successful: ok}, nil
}

func (f *nopSettleSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.calls.Add(1)
	ok := make([]types.ChangeMessageVisibilityBatchResultEntry, len(in.Entries))
	for i, e := range in.Entries {
		ok[i].Id = e.Id
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{Successful: ok}, nil
}

// BenchmarkSettle: queueing one delete (or one visibility change in ten)
// through the batcher, batched by ten, sent by parallel calls to an
// in-process SQS. One op is one message.
func BenchmarkSettle(b *testing.B) {
	handles := make([]string, 1<<16)
	for i := range handles {
		handles[i] = "h-" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name     string
		visEvery int // every visEvery-th op is a visibility change; 0: none
	}{{"deletes", 0}, {"mixed", 10}} {
		b.Run(tc.name, func(b *testing.B) {
			f := &nopSettleSQS{}
			s := newBatcher(f, "https://sqs.test/123456789012/q", time.Hour, 8, zap.NewNop())
			go s.run()
			b.ReportAllocs()
			msg := &Message{ID: "m"}
			i := 0
			for b.Loop() {
				h := handles[i&(len(handles)-1)]
				if tc.visEvery > 0 && i%tc.visEvery == 0 {
					s.changeVisibility(h, msg, 5, nil)
				} else {
					s.delete(h, msg, nil)
				}
				i++
			}
			s.close()
			b.ReportMetric(float64(i)/float64(f.calls.Load()), "msgs/call")
		})
	}
}
