package outboxdynamo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/outbox/outboxtest"
)

// Two writers of one entity whose clocks disagree: the one that commits
// second with an earlier stamp is refused, retries with a later stamp, and
// the relay publishes in commit order.
func TestOrderConflictFollowsCommitOrder(t *testing.T) {
	_, mk := newTable(t)
	base := time.Now()
	ahead := mk(outboxdynamo.Config{NowFunc: func() time.Time { return base.Add(time.Minute) }})
	behind := mk(outboxdynamo.Config{NowFunc: func() time.Time { return base }})
	ctx := context.Background()
	first := outbox.Event{ID: "first", Entity: "acct-1", Payload: "1"}
	second := outbox.Event{ID: "second", Entity: "acct-1", Payload: "2"}
	if err := ahead.Commit(ctx, func() ([]types.TransactWriteItem, error) { return ahead.Put(first) }); err != nil {
		t.Fatal(err)
	}
	items, err := behind.Put(second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = testenv.Dynamo(t).TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if !behind.IsOrderConflict(err) {
		t.Fatalf("a write stamped before the entity's last committed event: %v, want an order conflict", err)
	}
	if err := behind.Commit(ctx, func() ([]types.TransactWriteItem, error) { return behind.Put(second) }); err != nil {
		t.Fatalf("Commit after the conflict: %v", err)
	}
	var got []string
	for range 3 {
		evs, err := behind.Due(ctx, "r1", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			got = append(got, e.ID)
		}
		if err := behind.Published(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != "first,second" {
		t.Fatalf("published %v, want commit order first,second", got)
	}
}

// Two relays publish from DynamoDB to a FIFO queue on the local stack
// (outboxtest.RunRelays).
func TestRelaysOnTheLocalStack(t *testing.T) {
	outboxtest.RunRelays(t, func(t *testing.T) outboxtest.Harness {
		st, _ := newTable(t)
		return outboxtest.Harness{
			Store: st,
			Commit: func(ctx context.Context, evs ...outbox.Event) error {
				return st.Commit(ctx, func() ([]types.TransactWriteItem, error) { return st.Put(evs...) })
			},
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
