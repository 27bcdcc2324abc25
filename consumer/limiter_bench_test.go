package consumer

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/pipeline"
)

// BenchmarkLimiterNotLimiting is what the limiter costs a message when
// it does not limit: a rate never reached and each message its own key
// (a slot taken and freed), from 32 workers at once.
func BenchmarkLimiterNotLimiting(b *testing.B) {
	r := &runner{log: zap.NewNop(), pipeline: pipeline.New(pipeline.Config{}), workBase: context.Background(), capacity: newCapacity(32, 10, 0)}
	cfg, err := Limits{Rate: 1e9, KeyLimitFunc: func(m *Message) (string, int) { return m.ID, 1 }}.withDefaults(32)
	if err != nil {
		b.Fatal(err)
	}
	l, err := newLimiter(r, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetParallelism(32)
	b.ReportAllocs()
	var goroutines atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		g := goroutines.Add(1)
		const ring = 64
		var msgs [ring]inflight
		var lims [ring]msgLimit
		for i := range msgs {
			msgs[i].msg = &Message{ID: strconv.FormatInt(g, 10) + "-" + strconv.Itoa(i)}
			msgs[i].lim = &lims[i]
		}
		var tok limitToken
		i := 0
		for pb.Next() {
			m := &msgs[i%ring]
			i++
			*m.lim = msgLimit{}
			if l.start(ctx, m, nil, false, &tok) != limitStart {
				b.Fatal("held")
			}
			l.done(m)
		}
	})
}
