package sqslambda_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

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
