package sqslambda_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// TestLostVisibilityLeftAlone (issue 42, defect 5): a record whose
// visibility is lost while it runs fails, on its MaxAttempts-th receive or
// transiently before it. The adapter leaves the message alone: no dead
// letter while another consumer may hold it, no visibility change with
// the old handle, and it is reported as a batch item failure, so that the
// event source mapping does not delete it either.
func TestLostVisibilityLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxAttempts int
	}{
		{"max attempts reached", 1},
		{"transient failure", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFake()
				h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
					<-ctx.Done()
					return fmt.Errorf("charge: %w", context.Cause(ctx))
				})
				a := newHandler(t, refusingSQS{fake}, h, func(c *sqslambda.Config) {
					c.Visibility = 3 * time.Second
					c.MaxAttempts = tc.maxAttempts
				})
				resp, _ := a.Handle(context.Background(), fake.event(rec(stdARN, "m1", "x", "")))
				if got := failures(resp); got != "m1" {
					t.Errorf("batchItemFailures = %q, want m1: a success would have Lambda delete it", got)
				}
				if sent := fake.sent(); len(sent) != 0 {
					t.Errorf("%d dead letter(s) sent while another consumer may hold the message", len(sent))
				}
				if v := fake.visibilities()["rh-m1"]; len(v) != 0 {
					t.Errorf("visibility set to %v with the lost handle, want no change", v)
				}
			})
		})
	}
}

// panickyObserver panics in every method, as a buggy metrics adapter
// would.
type panickyObserver struct{}

func boom() {
	panic("assignment to entry in nil map") // a metrics adapter's bug
}

func (panickyObserver) Received(*consumer.Message)                          { boom() }
func (panickyObserver) HandlerDone(*consumer.Message, time.Duration, error) { boom() }
func (panickyObserver) Settled(*consumer.Message, consumer.Result)          { boom() }
func (panickyObserver) HeartbeatFailed(int, error)                          { boom() }
func (panickyObserver) LeaseLost(*consumer.Message, error)                  { boom() }
func (panickyObserver) DeadLettered(*consumer.Message, error)               { boom() }
func (panickyObserver) DeadLetterRefused(*consumer.Message, error)          { boom() }
func (panickyObserver) SettleFailed(*consumer.Message, string, error)       { boom() }
func (panickyObserver) ReceiveFailed(error)                                 { boom() }

// TestUserCallbackPanicsRecovered (issue 42, defect 13): an Observer that
// panics in every method and a Classifier that panics do not crash the
// invocation: each record is settled as without them, the classifier's
// panic counting as a transient failure (a retry after the backoff).
func TestUserCallbackPanicsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFake()
		h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			switch msg.Body {
			case "fail":
				return errors.New("declined")
			case "bad":
				return consumer.Permanent(errors.New("malformed"))
			}
			return nil
		})
		a := newHandler(t, fake, h, func(c *sqslambda.Config) {
			c.Observer = panickyObserver{}
			c.Classifier = consumer.ClassifierFunc(func(_ context.Context, m *consumer.Message, _ error) (consumer.Verdict, bool) {
				if m.Body == "fail" {
					boom()
				}
				return consumer.Verdict{}, false
			})
		})
		var resp events.SQSEventResponse
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("panic escaped Handle: %v", v)
				}
			}()
			resp, _ = a.Handle(context.Background(), fake.event(
				rec(stdARN, "m1", "ok", ""), rec(stdARN, "m2", "fail", ""), rec(stdARN, "m3", "bad", ""),
			))
		}()
		if got := failures(resp); got != "m2" {
			t.Errorf("batchItemFailures = %q, want m2", got)
		}
		if v := fake.visibilities()["rh-m2"]; len(v) != 1 || v[0] != 10 {
			t.Errorf("m2's visibility set to %v, want [10]: the backoff's delay", v)
		}
		if sent := fake.sent(); len(sent) != 1 || aws.ToString(sent[0].MessageBody) != "bad" {
			t.Errorf("dead letters %v, want the one of m3", sent)
		}
	})
}
