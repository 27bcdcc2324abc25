package main

import (
	"context"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestRunsDropTheirQueues: a throughput run, of either side, and
// a dedupe row's run delete their queues once they are over, so that the
// emulator does not carry the state of the runs before them into the next
// (a FIFO queue keeps up to 10,000 deduplication ids).
func TestRunsDropTheirQueues(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	ctx := context.Background()
	e, err := newEnv(ctx, client, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)
	b := &bench{ctx: ctx, client: client, env: e, n: 30, runs: 1, errw: io.Discard}
	if _, _, err := b.plainOnce(true, 3, 1, 30); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sqsonceOnce("drop", true, 3, runOpts{concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	if err := b.onUnique(ctx, "drop-unique", 5, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if e.made != 3 || len(e.urls) != 0 {
		t.Errorf("made %d queues, %d left undeleted (%v); want 3 made, none left", e.made, len(e.urls), e.urls)
	}
	out, err := client.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(e.prefix)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.QueueUrls) != 0 {
		t.Errorf("the server still has %v", out.QueueUrls)
	}
}
