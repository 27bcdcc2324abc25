package consumer_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// failObserver counts failed receives.
type failObserver struct {
	consumer.NopObserver
	mu     sync.Mutex
	failed []error
}

func (o *failObserver) ReceiveFailed(err error) {
	o.mu.Lock()
	o.failed = append(o.failed, err)
	o.mu.Unlock()
}

func (o *failObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.failed)
}

// countingFake counts the ReceiveMessage calls that failed.
type countingFake struct {
	*sqsfake.Fake
	failed atomic.Int64
}

func (c *countingFake) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.Fake.ReceiveMessage(ctx, in, o...)
	if err != nil {
		c.failed.Add(1)
	}
	return out, err
}

// receiveErrors reads the failed ReceiveMessage calls from the
// sqsonce.sqs.errors metric.
func receiveErrors(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || m.Name != "sqsonce.sqs.errors" {
				continue
			}
			for _, dp := range sum.DataPoints {
				if op, _ := dp.Attributes.Value("messaging.operation.name"); op.AsString() == "ReceiveMessage" {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// TestQueueDeletedRunReturns (issue 42, defect 11): the queue is deleted
// under a running consumer. Every receive fails with QueueDoesNotExist,
// which retrying cannot heal: the Observer and the metrics see each
// failure, Ready reports it, and once receives have failed for the
// default grace Run stops and returns an error that names the queue and
// SQS's error.
func TestQueueDeletedRunReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		client := &countingFake{Fake: f}
		obs := &failObserver{}
		reader := sdkmetric.NewManualReader()
		c, err := consumer.New(consumer.Config{
			Client: client, QueueURL: q, WaitTime: time.Second, Observer: obs,
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			Handler:       consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(); err == nil {
			t.Error("Ready before Run = nil, want not running")
		}
		errc := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { errc <- c.Run(ctx) }()
		time.Sleep(5 * time.Second)
		if err := c.Ready(); err != nil {
			t.Errorf("Ready while receiving = %v, want nil", err)
		}
		if _, err := f.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(q)}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		time.Sleep(10 * time.Second)
		if err := c.Ready(); err == nil || !strings.Contains(err.Error(), "QueueDoesNotExist") || !strings.Contains(err.Error(), q) {
			t.Errorf("Ready after the queue was deleted = %v, want an error naming the queue and QueueDoesNotExist", err)
		}
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), "QueueDoesNotExist") {
				t.Fatalf("Run = %v, want an error naming %s and QueueDoesNotExist", err, q)
			}
			if d := time.Since(deleted); d < consumer.DefaultReceiveErrorGrace || d > consumer.DefaultReceiveErrorGrace+10*time.Second {
				t.Errorf("Run returned %s after the queue was deleted, want after the 1m grace", d)
			}
		case <-time.After(time.Hour):
			cancel()
			<-errc
			t.Fatalf("after 1h of QueueDoesNotExist, Run has not returned; %d ReceiveMessage calls", f.Calls("ReceiveMessage"))
		}
		failed := client.failed.Load()
		if failed < 10 || int64(obs.count()) != failed {
			t.Errorf("%d failed receives, %d seen by the Observer; want them all (at least 10)", failed, obs.count())
		}
		if n := receiveErrors(t, reader); n != failed {
			t.Errorf("sqsonce.sqs.errors{ReceiveMessage} = %d, want %d", n, failed)
		}
		if err := c.Ready(); err == nil {
			t.Error("Ready after Run returned = nil, want not running")
		}
	})
}

// TestReceiveErrorsThatHeal: receives that fail with errors that heal by
// themselves (throttling, server errors), or with an error that cannot
// heal but never for the whole grace in a row, do not stop Run: it
// receives again once SQS answers, and Ready turns nil again.
func TestReceiveErrorsThatHeal(t *testing.T) {
	denied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized"}
	// Receives are retried at most 5s apart: every 8th of them comes
	// within 40s, less than the grace.
	for _, tc := range []struct {
		name string
		err  func(elapsed time.Duration, call int) error // the error of a receive; nil: it runs
	}{
		{"throttled for ten minutes", func(d time.Duration, _ int) error {
			if d < 10*time.Minute {
				return &smithy.GenericAPIError{Code: "RequestThrottled"}
			}
			return nil
		}},
		{"server errors for ten minutes", func(d time.Duration, _ int) error {
			if d < 10*time.Minute {
				return &smithy.GenericAPIError{Code: "InternalFailure", Fault: smithy.FaultServer}
			}
			return nil
		}},
		{"denied, throttled every 8th receive", func(d time.Duration, call int) error {
			switch {
			case d >= 10*time.Minute:
				return nil
			case call%8 == 0:
				return &smithy.GenericAPIError{Code: "RequestThrottled"}
			}
			return denied
		}},
		{"denied, every 8th receive succeeds", func(d time.Duration, call int) error {
			if d >= 10*time.Minute || call%8 == 0 {
				return nil
			}
			return denied
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
				start := time.Now()
				var calls atomic.Int64
				f.Inject(func(op string, _ any) sqsfake.Fault {
					if op != "ReceiveMessage" {
						return sqsfake.Fault{}
					}
					return sqsfake.Fault{Err: tc.err(time.Since(start), int(calls.Add(1)))}
				})
				c, err := consumer.New(consumer.Config{
					Client: f, QueueURL: q, WaitTime: time.Second,
					Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
				})
				if err != nil {
					t.Fatal(err)
				}
				errc := make(chan error, 1)
				ctx, cancel := context.WithCancel(context.Background())
				go func() { errc <- c.Run(ctx) }()
				time.Sleep(30 * time.Second)
				if err := c.Ready(); err == nil && !strings.Contains(tc.name, "succeeds") {
					t.Error("Ready while receives fail = nil, want their error")
				}
				select {
				case err := <-errc:
					t.Fatalf("Run returned while receives could still heal: %v", err)
				case <-time.After(11 * time.Minute):
				}
				f.Put(q, "after", "")
				if !waitUntil(time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
					t.Error("the message sent once receives healed was not handled")
				}
				if err := c.Ready(); err != nil {
					t.Errorf("Ready once receives succeed again = %v, want nil", err)
				}
				cancel()
				if err := <-errc; err != nil {
					t.Fatalf("Run = %v", err)
				}
			})
		})
	}
}

// TestReceiveErrorGrace: with ReceiveErrorGrace set, Drain (as Run)
// returns the receive error once receives have failed with an error that
// cannot heal for that long.
func TestReceiveErrorGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(q, "one", "")
		var ran atomic.Int64
		var deleted time.Time
		c, err := consumer.New(consumer.Config{
			Client: f, QueueURL: q, WaitTime: time.Second, ReceiveErrorGrace: 10 * time.Second,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				ran.Add(1)
				f.Inject(func(op string, _ any) sqsfake.Fault {
					if op == "ReceiveMessage" {
						return sqsfake.Fault{Err: &smithy.GenericAPIError{Code: "KMS.DisabledException", Message: "key disabled"}}
					}
					return sqsfake.Fault{}
				})
				deleted = time.Now()
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- c.Drain(context.Background()) }()
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), "KMS.DisabledException") {
				t.Fatalf("Drain = %v, want an error naming %s and KMS.DisabledException", err, q)
			}
			if d := time.Since(deleted); d < 10*time.Second || d > 20*time.Second {
				t.Errorf("Drain returned %s after receives began failing, want after the 10s grace", d)
			}
		case <-time.After(time.Hour):
			t.Fatal("after 1h of KMS.DisabledException, Drain has not returned")
		}
		if ran.Load() != 1 {
			t.Errorf("handler ran %d times, want 1", ran.Load())
		}
	})
	if _, err := consumer.New(consumer.Config{
		Client: sqsfake.New(), QueueURL: "q", ReceiveErrorGrace: -time.Second,
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
	}); err == nil || !strings.Contains(err.Error(), "ReceiveErrorGrace") {
		t.Errorf("New with a negative ReceiveErrorGrace = %v, want an error naming it", err)
	}
}
