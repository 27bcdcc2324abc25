package redrive_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// BenchmarkMove reports the move rate (msgs/s) against the local stack,
// without a cap and with Rate 50:
//
//	go test -run '^$' -bench BenchmarkMove -benchtime 1x ./redrive/
func BenchmarkMove(b *testing.B) {
	for _, c := range []struct {
		n    int
		rate float64
	}{{1000, 0}, {250, 50}} {
		b.Run(fmt.Sprintf("n=%d/rate=%v", c.n, c.rate), func(b *testing.B) {
			client := testenv.SQS(b)
			src, dlq := testenv.QueueWithDLQ(b, client, "bench-move", testenv.QueueOptions{})
			r := newRedriver(b, client)
			q := resolve(b, r, dlq)
			moved, secs := 0, 0.0
			for b.Loop() {
				b.StopTimer()
				putDead(b, client, dlq, false, seq("bench", c.n, src)...)
				b.StartTimer()
				sum, err := r.Move(context.Background(), q, redrive.MoveOptions{Rate: c.rate})
				if err != nil || sum.Moved != c.n {
					b.Fatalf("%+v %v", sum, err)
				}
				moved += sum.Moved
				secs += sum.Active.Seconds()
			}
			b.ReportMetric(float64(moved)/secs, "msgs/s")
		})
	}
}
