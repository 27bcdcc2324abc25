package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestWorkExitsWhenItsQueueIsGone (issue 42, defect 11): the queue is
// deleted under `ledger work`. Once its receives have failed for the
// consumer's grace (a minute), work exits 1 with an error that names the
// queue and SQS's error, instead of polling a queue that is gone forever.
func TestWorkExitsWhenItsQueueIsGone(t *testing.T) {
	l := newLedgerCLIStore(t, false, storeDynamoDB)
	l.ok("send", "-n", "3")
	type exit struct {
		code   int
		stderr string
	}
	done := make(chan exit, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		code, _, stderr := l.run(ctx, "work", "-wait", "1s")
		done <- exit{code, stderr}
	}()
	// Running: it drained what was sent.
	deadline := time.Now().Add(time.Minute)
	for {
		var st queueStatus
		if err := json.Unmarshal([]byte(l.ok("status", "-json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.QueueDrained {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sq := testenv.SQS(t)
	out, err := sq.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(l.names().Queue)})
	if err != nil {
		t.Fatal(err)
	}
	queueURL := aws.ToString(out.QueueUrl)
	if _, err := sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-done:
		last := lastLines(e.stderr, 1)
		if e.code != 1 || !strings.HasPrefix(last, "ledger: consumer: queue "+queueURL) ||
			!strings.Contains(last, "QueueDoesNotExist") && !strings.Contains(last, "NonExistentQueue") {
			t.Fatalf("work exited %d, last line %q; want 1 and an error naming %s and QueueDoesNotExist\n%s",
				e.code, last, queueURL, lastLines(e.stderr, 10))
		}
	case <-time.After(3 * time.Minute):
		cancel()
		e := <-done
		t.Fatalf("ledger work still running 3m after its queue was deleted (exit %d once cancelled)\n%s", e.code, lastLines(e.stderr, 5))
	}
}
