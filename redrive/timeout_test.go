package redrive_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/redrive"
)

// hang makes the chosen call never answer (a response lost on a reused
// connection): it returns only when its context ends.
type hang struct {
	redrive.SQSAPI
	receive, send bool
}

func (h hang) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if h.receive {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.SQSAPI.ReceiveMessage(ctx, in, o...)
}

func (h hang) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if h.send {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.SQSAPI.SendMessageBatch(ctx, in, o...)
}

// A receive or send whose response never comes ends after a per-call
// timeout (a receive: the long-poll wait plus a margin, tried twice)
// instead of hanging the command; nothing is lost.
func TestCallsHaveTimeouts(t *testing.T) {
	for _, c := range []struct {
		name          string
		receive, send bool
		within        time.Duration
	}{
		{"receive", true, false, 2 * (1*time.Second + 10*time.Second)},
		{"send", false, true, 20 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, dlqURL := newFake(t)
				putN(t, f, dlqURL, 3, nil)
				r, _ := redrive.New(redrive.Config{Client: hang{SQSAPI: f, receive: c.receive, send: c.send}, WaitTime: time.Second})
				ctx := context.Background()
				dlq, _ := r.Queue(ctx, "dlq")
				start := time.Now()
				sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: "src"})
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err %v (%+v)", err, sum)
				}
				if d := time.Since(start); d != c.within {
					t.Fatalf("gave up after %s, want %s", d, c.within)
				}
				if n := len(f.Messages(dlqURL)); n != 3 || len(f.Sent(f.QueueURL("src"))) != 0 {
					t.Fatalf("dlq %d after a hung %s", n, c.name)
				}
			})
		})
	}
}
