package outboxpg_test

import (
	"context"
	"testing"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/outbox/outboxtest"
)

// Two relays publish from PostgreSQL to a FIFO queue on the local stack
// (outboxtest.RunRelays).
func TestRelaysOnTheLocalStack(t *testing.T) {
	outboxtest.RunRelays(t, func(t *testing.T) outboxtest.Harness {
		pool := newPool(t)
		st := newStore(t, pool, outboxpg.Config{})
		return outboxtest.Harness{
			Store:  st,
			Commit: func(ctx context.Context, evs ...outbox.Event) error { return commit(ctx, pool, st, evs...) },
		}
	}, localQueue)
}

// localQueue is a fresh FIFO queue on the local stack.
func localQueue(t *testing.T) outboxtest.Queue {
	client := testenv.SQS(t)
	url, _ := testenv.Queue(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true})
	return outboxtest.Queue{Client: client, URL: url, Receive: func(t *testing.T, n int) []sqstypes.Message {
		return testenv.Receive(t, client, url, n, true)
	}}
}
