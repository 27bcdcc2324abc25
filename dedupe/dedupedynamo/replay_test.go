package dedupedynamo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
)

// replayAPI sends every PutItem and UpdateItem twice with the same input
// and returns the second answer: what the SDK's retryer does when a call
// was applied but its answer was lost (a connection reset, a timeout).
type replayAPI struct{ *dynamodb.Client }

func (r replayAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if _, err := r.Client.PutItem(ctx, in, opts...); err != nil {
		return nil, err
	}
	return r.Client.PutItem(ctx, in, opts...)
}

func (r replayAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := r.Client.UpdateItem(ctx, in, opts...); err != nil {
		return nil, err
	}
	return r.Client.UpdateItem(ctx, in, opts...)
}

// TestRetriedCallsAreOurs: a claim or a completion that the SDK retried
// after it had been applied must still succeed, and must not leave the key
// looking taken by someone else.
func TestRetriedCallsAreOurs(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	now := time.Now()
	clock := func() time.Time { return now }
	s := newStore(t, replayAPI{client}, table, clock)
	ctx := context.Background()

	c, err := s.Claim(ctx, "k1", "fp", time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("replayed claim: %+v, %v; want claimed", c, err)
	}
	if err := s.Extend(ctx, "k1", c.Token, time.Minute); err != nil {
		t.Fatalf("extend after a replayed claim: %v", err)
	}
	if err := s.Complete(ctx, "k1", c.Token); err != nil {
		t.Fatalf("replayed complete: %v", err)
	}
	plain := newStore(t, client, table, clock)
	if c2, err := plain.Claim(ctx, "k1", "fp", time.Minute); err != nil || c2.Status != dedupe.Duplicate {
		t.Fatalf("claim after completion: %+v, %v; want duplicate", c2, err)
	}
	// A stale token is still refused, replay or not.
	if err := s.Complete(ctx, "k1", "someone-else"); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("complete with a foreign token: %v; want ErrNotOwner", err)
	}
}

var _ dedupedynamo.DynamoDBAPI = replayAPI{}
