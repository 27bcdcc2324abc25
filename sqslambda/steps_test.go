package sqslambda_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/sqslambda"
	"github.com/sqsonce/sqsonce/step"
)

// Steps under the Lambda adapter, with the dedupe middleware: a charge
// whose answer was lost fails the record (a batch item failure); the
// next invocation reconciles it (charged: not again) and succeeds. With
// policy park the record is dead-lettered with class outcome_unknown and
// the step's name, and reported as a success.
func TestStepsUnderLambda(t *testing.T) {
	t.Parallel()
	for _, policy := range []step.Policy{step.Reconcile, step.Park} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			mw, err := dedupe.New(dedupe.Config{Store: dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "lambda"})})
			if err != nil {
				t.Fatal(err)
			}
			charges := 0
			h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
				_, err := step.Run(ctx, "charge", step.Options{
					Policy: policy,
					ReconcileFunc: func(context.Context) (step.Reconciliation, error) {
						if charges > 0 {
							return step.Done([]byte("ch_1")), nil
						}
						return step.NotDone(), nil
					},
				}, func(context.Context) ([]byte, error) {
					charges++
					return nil, fmt.Errorf("POST /charges: %w", io.ErrUnexpectedEOF)
				})
				return err
			})
			a := newHandler(t, fake, h, func(c *sqslambda.Config) { c.Middleware = []consumer.Middleware{mw.Wrap} })
			resp, _ := a.Handle(context.Background(), fake.event(rec(stdARN, "m1", "order 42", "")))
			if policy == step.Park {
				if got := failures(resp); got != "" {
					t.Fatalf("batchItemFailures = %q, want none (dead-lettered)", got)
				}
				s := fake.sent()
				if len(s) != 1 {
					t.Fatalf("%d dead letters, want 1", len(s))
				}
				f, ok := deadletter.ParseFailure(s[0].MessageAttributes)
				if !ok || f.Class != deadletter.ClassOutcomeUnknown || f.Step != "charge" {
					t.Fatalf("dead letter %q: failure %+v, want class outcome_unknown, step charge", aws.ToString(s[0].MessageBody), f)
				}
				return
			}
			if got := failures(resp); got != "m1" {
				t.Fatalf("batchItemFailures = %q, want m1 (the charge's outcome is unknown)", got)
			}
			resp, _ = a.Handle(context.Background(), fake.event(rec(stdARN, "m1", "order 42", "")))
			if got := failures(resp); got != "" || charges != 1 {
				t.Fatalf("second invocation: batchItemFailures %q, %d charges; want none and 1", got, charges)
			}
		})
	}
}
