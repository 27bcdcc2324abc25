package limitdynamo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/limit"
	"github.com/sqsonce/sqsonce/limit/limitdynamo"
	"github.com/sqsonce/sqsonce/limit/limittest"
)

// newTable creates a limits table with CreateTable, dropped when the test
// ends.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	return testenv.StoreTable(t, "sqsonce-limits-test", limitdynamo.CreateTable)
}

func newStore(t *testing.T, client limitdynamo.DynamoDBAPI, table string, now func() time.Time) *limitdynamo.Store {
	t.Helper()
	s, err := limitdynamo.New(limitdynamo.Config{Client: client, Table: table, NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the suite on DynamoDB Local: block leasing, two
// workers' stores sharing one rate and one key's slots, a crashed
// worker's slots expiring.
func TestConformance(t *testing.T) {
	client, table := newTable(t)
	stores := func(t *testing.T, now func() time.Time) limit.Store { return newStore(t, client, table, now) }
	limittest.Run(t, stores)
	limittest.RunRate(t, stores)
}

// TestItems: what the items hold, as the package documents them.
func TestItems(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	now := time.Unix(1_900_000_000, 0)
	s := newStore(t, client, table, func() time.Time { return now })
	ctx := context.Background()
	if _, err := s.Reserve(ctx, "partner", limit.RateRequest{Every: time.Millisecond, N: 5, Burst: time.Millisecond, Ahead: time.Second}); err != nil {
		t.Fatal(err)
	}
	item := testenv.Item(t, client, table, "rate#partner")
	if n := item["next"].(*types.AttributeValueMemberN).Value; n != "1900000000004000000" {
		t.Errorf("next = %s, want now − 1 ms + 5 ms in ns", n)
	}
	if _, ok := item["expires_at"]; !ok {
		t.Error("no expires_at on the rate's item")
	}
	sl := limit.Slot{Name: "accounts", Key: "acct-1", Holder: "h1"}
	if ok, err := s.Acquire(ctx, sl, 2, 30*time.Second); err != nil || !ok {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	item = testenv.Item(t, client, table, "slots#accounts#acct-1")
	h := item["holders"].(*types.AttributeValueMemberM).Value
	if v := h["h1"].(*types.AttributeValueMemberN).Value; v != "1900000030000" {
		t.Errorf("holders = %v, want h1 → now + 30 s in ms", h)
	}
	if err := s.Release(ctx, sl); err != nil {
		t.Fatal(err)
	}
	item = testenv.Item(t, client, table, "slots#accounts#acct-1")
	if h := item["holders"].(*types.AttributeValueMemberM).Value; len(h) != 0 {
		t.Errorf("after Release holders = %v, want none", h)
	}
}

// TestCheck: a missing table is reported with its name and the fix.
func TestCheck(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	if err := newStore(t, client, table, time.Now).Check(context.Background()); err != nil {
		t.Fatalf("Check after CreateTable: %v", err)
	}
	err := newStore(t, client, table+"-missing", time.Now).Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), table+"-missing") {
		t.Fatalf("Check of a missing table: %v", err)
	}
}
