package outboxdynamo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
)

// Two writers' transactions over one entity whose stamps interleave: P1
// stamps X@T, Y@T+1, X@T+2 and P2 stamps X@T+1, and P2 commits first. P1's
// first event of X is stamped before P2's, which is already committed, so
// P1's transaction must be refused (an order conflict) and committed again
// with later stamps; otherwise the relay publishes X's events interleaved,
// p1-first, p2-only, p1-second, against the commit order p2-only, p1-first,
// p1-second.
func TestOrderConflictOnTheFirstStampOfAnEntity(t *testing.T) {
	_, mk := newTable(t)
	base := time.UnixMicro(1_900_000_000_000_000)
	p1 := mk(outboxdynamo.Config{NowFunc: func() time.Time { return base }})
	p2 := mk(outboxdynamo.Config{NowFunc: func() time.Time { return base.Add(time.Microsecond) }})
	ctx := context.Background()
	client := testenv.Dynamo(t)

	p1Items, err := p1.Put(
		outbox.Event{ID: "p1-first", Entity: "X", Payload: "1"},
		outbox.Event{ID: "p1-y", Entity: "Y", Payload: "y"},
		outbox.Event{ID: "p1-second", Entity: "X", Payload: "2"},
	)
	if err != nil {
		t.Fatal(err)
	}
	p2Items, err := p2.Put(outbox.Event{ID: "p2-only", Entity: "X", Payload: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: p2Items}); err != nil {
		t.Fatalf("P2 commits first: %v", err)
	}
	_, err = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: p1Items})
	if err == nil {
		t.Error("P1's transaction, whose first event of X is stamped before P2's committed one, committed")
	} else if !p1.IsOrderConflict(err) {
		t.Fatalf("P1's transaction: %v, want an order conflict", err)
	} else if err := p1.Commit(ctx, func() ([]types.TransactWriteItem, error) {
		return p1.Put(
			outbox.Event{ID: "p1-first", Entity: "X", Payload: "1"},
			outbox.Event{ID: "p1-y", Entity: "Y", Payload: "y"},
			outbox.Event{ID: "p1-second", Entity: "X", Payload: "2"},
		)
	}); err != nil {
		t.Fatalf("P1's Commit after the conflict: %v", err)
	}

	var got []string
	for range 5 {
		evs, err := p1.Due(ctx, "r1", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Entity == "X" {
				got = append(got, e.ID)
			}
		}
		if err := p1.Published(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	if want := "[p2-only p1-first p1-second]"; fmt.Sprint(got) != want {
		t.Fatalf("entity X published %v, want commit order %s", got, want)
	}
}
