package outboxdynamo_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
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

// pausedQuery lets the Query of one partition read, then holds its
// answer until released: a read that DynamoDB answered before a write the
// relay makes meanwhile.
type pausedQuery struct {
	outboxdynamo.DynamoDBAPI
	pk       atomic.Pointer[string] // the partition whose next Query is held
	answered chan struct{}
	release  chan struct{}
}

func (c *pausedQuery) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.DynamoDBAPI.Query(ctx, in, opts...)
	if pk := c.pk.Load(); pk != nil {
		if v, ok := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS); ok && v.Value == *pk && c.pk.CompareAndSwap(pk, nil) {
			close(c.answered)
			<-c.release
		}
	}
	return out, err
}

// A relay reads its next batch while it sends one (Relay.Run with a
// RunStore). When that read reads an event of the batch again (a new pass
// of its partition) and the event's failed send is recorded between
// DynamoDB's answer and the Store keeping it, the Store must not keep the
// answer's older copy: it would hand the event out again with its old
// attempts, and a parked event would be sent, and parked, once more.
func TestReadAnsweredBeforeAFailedSendIsNotKept(t *testing.T) {
	_, mk := newTable(t)
	pq := &pausedQuery{DynamoDBAPI: testenv.Dynamo(t), answered: make(chan struct{}), release: make(chan struct{})}
	st := mk(outboxdynamo.Config{Client: pq})
	ctx := context.Background()
	backlog(t, st, "x", 1, 1)
	evs, err := st.DueRuns(ctx, "r1", 10, nil)
	if err != nil || len(evs) != 1 {
		t.Fatalf("DueRuns: %v, %v; want the one event", evs, err)
	}
	ev := evs[0]
	pk, _, _ := strings.Cut(ev.Handle, "|")
	pq.pk.Store(&pk)
	// Sent (in flight) while the next batch is read: its partition's pass
	// found nothing else due, so a new pass reads it again.
	type result struct {
		evs []outbox.Event
		err error
	}
	next := make(chan result, 1)
	go func() {
		evs, err := st.DueRuns(ctx, "r1", 10, []outbox.Event{ev})
		next <- result{evs, err}
	}()
	<-pq.answered
	ev.Attempts = 3
	if err := st.Failed(ctx, ev, "InternalError", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	close(pq.release)
	if r := <-next; r.err != nil || len(r.evs) != 0 {
		t.Fatalf("DueRuns with %s in flight: %v, %v; want nothing", ev.ID, r.evs, r.err)
	}
	evs, err = st.DueRuns(ctx, "r1", 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		t.Fatalf("after %s was parked: DueRuns handed out %s again (attempts %d, dead %v), want nothing", ev.ID, e.ID, e.Attempts, e.Dead)
	}
}
