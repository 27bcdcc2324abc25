package dedupedynamo_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestStoreKeepsItsConnection: claims and completions one after another,
// on connections whose request writer runs late, all go over one
// connection. Unguarded against the SDK's request-body race
// (internal/sdkhttp), each call closed its connection, and a response
// lost that way makes the SDK write again.
func TestStoreKeepsItsConnection(t *testing.T) {
	t.Parallel()
	_, table := newTable(t)
	var dials atomic.Int64
	late := dynamodb.NewFromConfig(testenv.Config(t), testenv.LocalDynamoOptions, func(o *dynamodb.Options) {
		o.HTTPClient = testenv.LateHTTPClient(&dials)
	})
	s := newStore(t, late, table, time.Now)
	ctx := context.Background()
	const keys = 5
	for i := range keys {
		c, err := s.Claim(ctx, fmt.Sprintf("order-%d", i), "fp", time.Minute)
		if err != nil || c.Status != dedupe.Claimed {
			t.Fatalf("claim %d: %+v %v", i, c, err)
		}
		if err := s.Complete(ctx, fmt.Sprintf("order-%d", i), c.Token); err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}
	if d := dials.Load(); d != 1 {
		t.Errorf("%d connections for %d claims and completions one after another, want 1", d, 2*keys)
	}
}
