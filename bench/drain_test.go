package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestDrain: `bench drain` empties a queue through the consumer and prints
// the msgs_per_s figure outside comparisons read.
func TestDrain(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	q, _ := testenv.Queue(t, client, "bench-drain", testenv.QueueOptions{})
	if err := preload(context.Background(), client, q, 50, 0, "{}"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"drain", "-queue-url", q, "-n", "50", "-concurrency", "4"}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench drain: exit %d\n%s", code, stderr.String())
	}
	if !regexp.MustCompile(`^drained=50 msgs_per_s=[0-9.]+ `).MatchString(stdout.String()) {
		t.Errorf("bench drain printed %q", stdout.String())
	}
	if visible, inFlight := testenv.Count(t, client, q); visible+inFlight != 0 {
		t.Errorf("queue still holds %d visible, %d in flight", visible, inFlight)
	}
}

func TestDrainUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"drain"}, {"drain", "-n", "5"}, {"drain", "-queue-url", "q", "-n", "0"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("bench %v: exit %d, want 2", args, code)
		}
	}
}
