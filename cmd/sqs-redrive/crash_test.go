package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// A move killed (SIGKILL) between a send and its delete, then run again:
// every message reaches the source at least once, and a consumer with
// dedupe applies each exactly once.
func TestCrashBetweenSendAndDelete(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	const n = 30
	putDead(t, client, dlq, src, n, "permanent")

	// First run: a child process that kills itself right after its second
	// batch was sent, before that batch is deleted from the DLQ.
	args, _ := json.Marshal([]string{"move", dlq, "--yes", "--visibility-timeout", "2s"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+string(args), envCrashAfter+"=2")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("the child was not killed: %v\n%s", err, out)
	}
	if got := count(t, client, src); got != 20 {
		t.Fatalf("after the crash the source has %d, want 20 (two batches sent)", got)
	}
	if got := count(t, client, dlq); got != 20 {
		t.Fatalf("after the crash the DLQ has %d, want 20 (one batch deleted)", got)
	}

	// Second run: the sent-but-not-deleted batch comes back after its
	// visibility timeout and is moved again (a duplicate, not a loss).
	code, stdout, stderr := cli(t, "move", dlq, "--yes", "--json", "--visibility-timeout", "2s")
	if code != 0 {
		t.Fatalf("second run: exit %d: %s %s", code, stdout, stderr)
	}
	if o := summaryOf(t, stdout); num(o, "moved") != 20 {
		t.Fatalf("second run: %s", stdout)
	}
	if got := count(t, client, dlq); got != 0 {
		t.Fatalf("the DLQ still has %d", got)
	}
	if got := count(t, client, src); got != n+10 {
		t.Fatalf("the source has %d, want %d (10 duplicates)", got, n+10)
	}

	// A consumer with dedupe applies each message exactly once.
	var mu sync.Mutex
	applied := map[string]int{}
	runs := 0
	dd, err := dedupe.New(dedupe.Config{Store: dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "crash"}), Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(consumer.Config{
		Client:   client,
		QueueURL: src,
		WaitTime: time.Second,
		Handler: consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			mu.Lock()
			defer mu.Unlock()
			applied[msg.Key()]++
			runs++
			return nil
		}),
		Middleware:      []consumer.Middleware{dd.Wrap},
		ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(applied)
		mu.Unlock()
		if k == n && count(t, client, src) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("consumer: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != n || runs != n {
		t.Fatalf("applied %d distinct ids in %d handler runs, want %d and %d", len(applied), runs, n, n)
	}
	for id, k := range applied {
		if k != 1 {
			t.Fatalf("%s applied %d times", id, k)
		}
	}
	if got := count(t, client, src); got != 0 {
		t.Fatalf("the source still has %d (duplicates not acked)", got)
	}
}
