package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/producer"
)

// heldMetrics reads sqsonce.messages.held by how and the next_due gauge.
func heldMetrics(t *testing.T, reader *sdkmetric.ManualReader) (held map[string]int64, nextDue float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	held = map[string]int64{}
	nextDue = -1
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "sqsonce.messages.held":
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					how, _ := dp.Attributes.Value("sqsonce.hold")
					held[how.AsString()] += dp.Value
				}
			case "sqsonce.messages.held.next_due":
				for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
					nextDue = dp.Value
				}
			}
		}
	}
	return held, nextDue
}

// TestHoldMetrics: a consumer counts the messages it holds, by how
// (visibility, resend), and reports the next time one is due, until none
// is held.
func TestHoldMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, _ := onFake(false, map[string]string{"MessageRetentionPeriod": "345600"}, nil)
		p, err := producer.New(producer.Config{Client: f, QueueURL: url})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		at := func(d time.Duration) time.Time { return start.Add(d) }
		for _, d := range []time.Duration{3 * time.Hour, 5 * time.Hour, 13 * time.Hour} {
			if _, err := p.Send(context.Background(), producer.Message{Body: d.String(), NotBefore: at(d)}); err != nil {
				t.Fatal(err)
			}
		}
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		var runs sync.Map
		stop := startOnFake(t, f, url, consumer.Config{MeterProvider: mp, BacklogInterval: -1,
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				runs.Store(m.Body, time.Now())
				return nil
			})})
		defer func() {
			if err := stop(); err != nil {
				t.Error(err)
			}
		}()
		unix := func(d time.Duration) float64 { return float64(at(d).UnixMilli()) / 1000 }
		for _, c := range []struct {
			at      time.Duration
			held    map[string]int64
			nextDue float64
		}{
			// All three came back after SQS's 15 minutes and were held.
			{20 * time.Minute, map[string]int64{"visibility": 3}, unix(3 * time.Hour)},
			{3*time.Hour + 5*time.Second, map[string]int64{"visibility": 3}, unix(5 * time.Hour)},
			// The 13-hour one came back after 12 hours less a minute: it
			// was re-sent, still due at 13 hours.
			{12*time.Hour + 20*time.Minute, map[string]int64{"visibility": 3, "resend": 1}, unix(13 * time.Hour)},
			{13*time.Hour + 5*time.Second, map[string]int64{"visibility": 4, "resend": 1}, 0},
		} {
			time.Sleep(time.Until(at(c.at)))
			held, next := heldMetrics(t, reader)
			if len(held) != len(c.held) || held["visibility"] != c.held["visibility"] || held["resend"] != c.held["resend"] || next != c.nextDue {
				t.Errorf("at +%s: held %v, next due %.3f; want %v, %.3f", c.at, held, next, c.held, c.nextDue)
			}
		}
		for _, d := range []time.Duration{3 * time.Hour, 5 * time.Hour, 13 * time.Hour} {
			v, ok := runs.Load(d.String())
			if !ok || v.(time.Time).Before(at(d)) {
				t.Errorf("the %s message ran at %v, want at or after +%s", d, v, d)
			}
		}
		checkProblems(t, f)
	})
}

// TestHoldBadMarks: a not-before attribute that does not parse, or one on
// a FIFO queue (which takes no per-message delay, and where a held
// message would block its group), is dead-lettered with a reason that
// says so, without running.
func TestHoldBadMarks(t *testing.T) {
	for _, c := range []struct {
		name   string
		fifo   bool
		value  string
		reason string
	}{
		{"malformed", false, "next tuesday", `malformed sqsonce-not-before: "next tuesday" is neither RFC 3339`},
		{"FIFO", true, "2999-01-01T00:00:00Z", "on a FIFO queue"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, url, dlq := onFake(c.fifo, nil, nil)
				in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{
					consumer.AttrNotBefore: {DataType: aws.String("String"), StringValue: aws.String(c.value)},
				}}
				if c.fifo {
					in.MessageGroupId, in.MessageDeduplicationId = aws.String("g"), aws.String("d")
				}
				if _, err := f.SendMessage(context.Background(), in); err != nil {
					t.Fatal(err)
				}
				ran := false
				stop := startOnFake(t, f, url, consumer.Config{Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
					ran = true
					return nil
				})})
				if !waitUntil(time.Minute, func() bool { return len(f.Sent(dlq)) == 1 }) {
					t.Fatal("not dead-lettered")
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				fl, ok := deadletter.ParseFailure(f.Sent(dlq)[0].Attributes)
				if !ok || fl.Class != deadletter.ClassPermanent || !strings.Contains(fl.Error, c.reason) {
					t.Errorf("failure %+v, want class permanent and a reason saying %q", fl, c.reason)
				}
				if ran {
					t.Error("the handler ran")
				}
				checkProblems(t, f)
			})
		})
	}
}

// TestHoldResendFails: a copy that cannot be re-sent is held by its
// visibility instead, and runs at its time, once; never lost.
func TestHoldResendFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, dlq := onFake(false, nil, nil)
		p, err := producer.New(producer.Config{Client: f, QueueURL: url})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		due := start.Add(20 * time.Minute)
		if _, err := p.Send(context.Background(), producer.Message{Body: "x", NotBefore: due}); err != nil {
			t.Fatal(err)
		}
		failed := 0
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "SendMessage" && failed == 0 {
				failed++
				return sqsfake.Fault{Err: errors.New("network down")}
			}
			return sqsfake.Fault{}
		})
		var mu sync.Mutex
		var ranAt []time.Time
		// One-minute hops: the first receive (at +15m) holds for a
		// minute, the second re-sends (which fails: held for a minute
		// more), the third re-sends.
		stop := startOnFake(t, f, url, consumer.Config{HoldHop: time.Minute,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				mu.Lock()
				ranAt = append(ranAt, time.Now())
				mu.Unlock()
				return nil
			})})
		time.Sleep(time.Until(due.Add(time.Minute)))
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ranAt) != 1 || ranAt[0].Before(due) || ranAt[0].After(due.Add(3*time.Second)) {
			t.Errorf("ran at %v, want once, at +20m or within 3s after", ranAt)
		}
		if failed != 1 || f.Calls("SendMessage") < 2 {
			t.Errorf("%d failed re-sends of %d, want one failed and a later one sent", failed, f.Calls("SendMessage"))
		}
		if n := len(f.Messages(url)) + len(f.Messages(dlq)); n != 0 {
			t.Errorf("%d messages left in the queue and its DLQ", n)
		}
		checkProblems(t, f)
	})
}
