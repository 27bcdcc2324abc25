package consumer_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// load is what the autoscaling gauges read at one collection.
type load struct {
	backlog     map[string]int64 // by sqsonce.message.state; nil when not reported
	utilization float64
	hasUtil     bool
	capacity    int64
	hasCapacity bool
	queues      map[string]bool // messaging.destination.name on every point
}

// readLoad collects the three autoscaling gauges from reader.
func readLoad(t *testing.T, reader *sdkmetric.ManualReader) load {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var l load
	l.queues = map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "sqsonce.consumer.queue.backlog":
				if m.Unit != "{message}" {
					t.Errorf("%s unit %q, want {message}", m.Name, m.Unit)
				}
				for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					if l.backlog == nil {
						l.backlog = map[string]int64{}
					}
					s, _ := dp.Attributes.Value("sqsonce.message.state")
					l.backlog[s.AsString()] = dp.Value
					q, _ := dp.Attributes.Value("messaging.destination.name")
					l.queues[q.AsString()] = true
				}
			case "sqsonce.consumer.utilization":
				if m.Unit != "1" {
					t.Errorf("%s unit %q, want 1", m.Name, m.Unit)
				}
				for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
					l.utilization, l.hasUtil = dp.Value, true
					q, _ := dp.Attributes.Value("messaging.destination.name")
					l.queues[q.AsString()] = true
				}
			case "sqsonce.consumer.capacity":
				if m.Unit != "{handler}" {
					t.Errorf("%s unit %q, want {handler}", m.Name, m.Unit)
				}
				for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					l.capacity, l.hasCapacity = dp.Value, true
					q, _ := dp.Attributes.Value("messaging.destination.name")
					l.queues[q.AsString()] = true
				}
			}
		}
	}
	return l
}

// isSample reports whether an SQS call is one of the backlog sampler's
// (start-up reads other attributes).
func isSample(op string, in any) bool {
	if op != "GetQueueAttributes" {
		return false
	}
	return slices.Contains(in.(*sqs.GetQueueAttributesInput).AttributeNames, types.QueueAttributeNameApproximateNumberOfMessages)
}

// fakeCounts reads the queue's three counts from the fake directly.
func fakeCounts(t *testing.T, f *sqsfake.Fake, q string) map[string]int64 {
	t.Helper()
	out, err := f.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &q, AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		t.Fatal(err)
	}
	n := func(name types.QueueAttributeName) int64 {
		v, err := strconv.ParseInt(out.Attributes[string(name)], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	return map[string]int64{
		"visible":   n(types.QueueAttributeNameApproximateNumberOfMessages),
		"in_flight": n(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		"delayed":   n(types.QueueAttributeNameApproximateNumberOfMessagesDelayed),
	}
}

// half makes every jittered wait its middle: the first sample after half
// the interval, the next ones a whole interval apart.
func half() float64 { return 0.5 }

// TestBacklogSampledAtTheInterval: with BacklogInterval 10s (jitter at
// its middle), the queue is sampled at 5s, 15s, 25s, … and the backlog
// gauge reads the queue's visible, in-flight and delayed counts; capacity
// is Concurrency and utilisation 1 while both handlers are blocked. Once
// Run has returned no sample is taken and no gauge is reported.
func TestBacklogSampledAtTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "60"}, nil)
		for i := range 20 {
			f.Put(q, fmt.Sprint(i), "")
		}
		for range 3 {
			if _, err := f.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("later"), DelaySeconds: 900}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		f.Inject(func(op string, in any) sqsfake.Fault {
			if isSample(op, in) {
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
			}
			return sqsfake.Fault{}
		})
		samples := func() []time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(at)
		}
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		release := make(chan struct{})
		var releaseOnce sync.Once
		defer releaseOnce.Do(func() { close(release) }) // before stop: handlers return
		stop := sync.OnceValue(startOnFake(t, f, q, consumer.WithSampleRand(consumer.Config{
			Concurrency: 2, Prefetch: consumer.NoPrefetch, MeterProvider: mp, BacklogInterval: 10 * time.Second,
			Handler: consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Message) error {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}),
		}, half)))
		defer stop() // also when the test fails

		time.Sleep(4 * time.Second)
		synctest.Wait()
		if got := samples(); len(got) != 0 {
			t.Fatalf("samples at %v before the first was due (5s)", got)
		}
		if l := readLoad(t, reader); l.backlog != nil || l.hasUtil || !l.hasCapacity || l.capacity != 2 {
			t.Fatalf("before the first sample: %+v, want only the capacity (2)", l)
		}

		time.Sleep(42 * time.Second) // t = 46s
		synctest.Wait()
		want := []time.Duration{5 * time.Second, 15 * time.Second, 25 * time.Second, 35 * time.Second, 45 * time.Second}
		if got := samples(); !slices.Equal(got, want) {
			t.Fatalf("samples at %v, want %v", got, want)
		}
		l := readLoad(t, reader)
		counts := fakeCounts(t, f, q)
		if fmt.Sprint(l.backlog) != fmt.Sprint(counts) || fmt.Sprint(counts) != "map[delayed:3 in_flight:2 visible:18]" {
			t.Fatalf("backlog gauge %v, queue %v; want both map[delayed:3 in_flight:2 visible:18]", l.backlog, counts)
		}
		if !l.hasUtil || l.utilization != 1 || l.capacity != 2 {
			t.Fatalf("utilization %v (reported %v), capacity %d; want 1 and 2: both handlers busy all along", l.utilization, l.hasUtil, l.capacity)
		}
		if fmt.Sprint(l.queues) != "map[orders:true]" {
			t.Fatalf("messaging.destination.name values %v, want orders", l.queues)
		}

		releaseOnce.Do(func() { close(release) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		n := len(samples())
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := samples(); len(got) != n {
			t.Fatalf("%d samples after Run returned, at %v", len(got)-n, got[n:])
		}
		if l := readLoad(t, reader); l.backlog != nil || l.hasUtil || l.hasCapacity {
			t.Fatalf("gauges still reported after Run returned: %+v", l)
		}
		checkProblems(t, f)
	})
}

// TestUtilizationOverTheInterval: capacity 4; three messages whose
// handlers run 10s, 3s and 22s, all from t=0; samples at 5s, 15s, 25s,
// 35s. Busy handler-seconds per window over 4 × its length: [0,5]
// 5+3+5 = 13 of 20; [5,15] 5+10 = 15 of 40; [15,25] 7 of 40; [25,35] 0.
func TestUtilizationOverTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "60"}, nil)
		for _, d := range []string{"10s", "3s", "22s"} {
			f.Put(q, d, "")
		}
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		start := time.Now()
		stop := sync.OnceValue(startOnFake(t, f, q, consumer.WithSampleRand(consumer.Config{
			Concurrency: 4, MeterProvider: mp, BacklogInterval: 10 * time.Second,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				d, err := time.ParseDuration(m.Body)
				if err != nil {
					return consumer.Permanent(err)
				}
				time.Sleep(d)
				return nil
			}),
		}, half)))
		defer stop() // also when the test fails
		for i, want := range []float64{13.0 / 20, 15.0 / 40, 7.0 / 40, 0} {
			time.Sleep(time.Until(start.Add(time.Duration(i*10+6) * time.Second))) // a second after the sample
			synctest.Wait()
			l := readLoad(t, reader)
			if !l.hasUtil || math.Abs(l.utilization-want) > 1e-9 {
				t.Errorf("sample %d (at %ds): utilization %v (reported %v), want %v", i+1, i*10+5, l.utilization, l.hasUtil, want)
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		checkProblems(t, f)
	})
}

// TestSamplingFailuresDoNotStopRun: while GetQueueAttributes is denied,
// messages are still received and handled, the backlog is left out of
// the metrics (a stale or zero backlog would mislead an autoscaler), one
// warning says what the sampler needs, and the repeats are logged at
// debug; once reads succeed again the backlog is back. Run ends cleanly.
func TestSamplingFailuresDoNotStopRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, nil, nil)
		var denied atomic.Bool
		denied.Store(true)
		f.Inject(func(op string, in any) sqsfake.Fault {
			if isSample(op, in) && denied.Load() {
				return sqsfake.Fault{Err: &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized to perform sqs:GetQueueAttributes"}}
			}
			return sqsfake.Fault{}
		})
		core, logs := observer.New(zapcore.DebugLevel)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		var handled atomic.Int64
		stop := sync.OnceValue(startOnFake(t, f, q, consumer.WithSampleRand(consumer.Config{
			MeterProvider: mp, BacklogInterval: 10 * time.Second, Logger: zap.New(core),
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				handled.Add(1)
				return nil
			}),
		}, half)))
		defer stop() // also when the test fails
		for i := range 12 {
			f.Put(q, fmt.Sprint(i), "")
			time.Sleep(2 * time.Second)
		}
		time.Sleep(10 * time.Second) // t = 34s: samples at 5, 15, 25 failed
		synctest.Wait()
		if handled.Load() != 12 || len(f.Messages(q)) != 0 {
			t.Fatalf("%d handled, %d left in the queue; want 12 and 0 while sampling fails", handled.Load(), len(f.Messages(q)))
		}
		l := readLoad(t, reader)
		if l.backlog != nil || !l.hasCapacity || !l.hasUtil {
			t.Fatalf("while reads fail: %+v; want no backlog, the capacity and the utilization", l)
		}
		failed := logs.FilterMessageSnippet("backlog").All()
		var levels []string
		for _, e := range failed {
			levels = append(levels, e.Level.String())
		}
		if fmt.Sprint(levels) != "[warn debug debug]" {
			t.Fatalf("log levels of the 3 failed samples %v, want [warn debug debug]", levels)
		}
		if msg := failed[0].Message; !strings.Contains(msg, "sqs:GetQueueAttributes") {
			t.Fatalf("warning %q does not say the sampler needs sqs:GetQueueAttributes", msg)
		}
		if errText := fmt.Sprint(failed[0].ContextMap()["error"]); !strings.Contains(errText, "AccessDenied") {
			t.Fatalf("warning's error %q does not carry SQS's answer", errText)
		}

		denied.Store(false)
		time.Sleep(10 * time.Second) // the sample at 35s succeeds
		synctest.Wait()
		if l := readLoad(t, reader); fmt.Sprint(l.backlog) != "map[delayed:0 in_flight:0 visible:0]" {
			t.Fatalf("backlog after reads succeed again: %v, want all 0", l.backlog)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkProblems(t, f)
	})
}

// TestNoSamplingWhenOff: without a MeterProvider, or with a negative
// BacklogInterval, the queue is never sampled and no gauge is reported;
// a BacklogInterval under a second is refused at New.
func TestNoSamplingWhenOff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metrics  bool
		interval time.Duration
	}{
		{"no MeterProvider", false, 10 * time.Second},
		{"negative BacklogInterval", true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, _ := onFake(false, nil, nil)
				var n atomic.Int64
				f.Inject(func(op string, in any) sqsfake.Fault {
					if isSample(op, in) {
						n.Add(1)
					}
					return sqsfake.Fault{}
				})
				reader := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
				cfg := consumer.Config{BacklogInterval: tc.interval, Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })}
				if tc.metrics {
					cfg.MeterProvider = mp
				}
				stop := sync.OnceValue(startOnFake(t, f, q, cfg))
				defer stop()
				time.Sleep(5 * time.Minute)
				synctest.Wait()
				if n.Load() != 0 {
					t.Fatalf("%d samples, want none", n.Load())
				}
				if l := readLoad(t, reader); l.backlog != nil || l.hasUtil || l.hasCapacity {
					t.Fatalf("gauges reported: %+v", l)
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
	_, err := consumer.New(consumer.Config{Client: sqsfake.New(), QueueURL: "q", BacklogInterval: 500 * time.Millisecond,
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })})
	if err == nil || !strings.Contains(err.Error(), "BacklogInterval") {
		t.Fatalf("New with BacklogInterval 500ms: %v, want an error naming BacklogInterval", err)
	}
}
