package dedupedynamo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// newTable creates a dedupe table with CreateTable, dropped when the test
// ends.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	return testenv.StoreTable(t, "sqsonce-dedupe-test", dedupedynamo.CreateTable)
}

func newStore(t *testing.T, client dedupedynamo.DynamoDBAPI, table string, now func() time.Time) *dedupedynamo.Store {
	t.Helper()
	s, err := dedupedynamo.New(dedupedynamo.Config{Client: client, Table: table, Namespace: "conformance", NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	client, table := newTable(t)
	dedupetest.Run(t, func(t *testing.T, now func() time.Time) dedupe.Store {
		return newStore(t, client, table, now)
	})
}

func TestRecordSchema(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	now := time.Unix(1_900_000_000, 0)
	s := newStore(t, client, table, func() time.Time { return now })
	ctx := context.Background()
	c, err := s.Claim(ctx, "order-1", "fp", time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("claim: %v %v", c, err)
	}
	item := testenv.Item(t, client, table, "conformance#order-1")
	want := map[string]string{
		"status": "IN_PROGRESS", "token": c.Token, "fingerprint": "fp",
		"lease_until": "1900000060000", "expires_at": "1902592000",
	}
	for k, v := range want {
		if got := testenv.Scalar(item[k]); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if err := s.Complete(ctx, "order-1", c.Token); err != nil {
		t.Fatal(err)
	}
	item = testenv.Item(t, client, table, "conformance#order-1")
	if testenv.Scalar(item["status"]) != "COMPLETED" || item["lease_until"] != nil {
		t.Errorf("completed item: %v", item)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	ctx := context.Background()
	if err := newStore(t, client, table, nil).Check(ctx); err != nil {
		t.Fatalf("Check on a CreateTable table: %v", err)
	}
	// Idempotent.
	if err := dedupedynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("CreateTable again: %v", err)
	}
	missing := newStore(t, client, "sqsonce-no-such-table", nil).Check(ctx)
	if missing == nil || !strings.Contains(missing.Error(), "sqsonce-no-such-table") || !strings.Contains(missing.Error(), "CreateTable") {
		t.Fatalf("missing table: %v", missing)
	}
	wrong := testenv.Table(t, client, "sqsonce-wrong", "id", "")
	err := newStore(t, client, wrong, nil).Check(ctx)
	if err == nil || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), `"pk"`) {
		t.Fatalf("wrong key schema: %v", err)
	}
	if err := dedupedynamo.CreateTable(ctx, client, wrong); err == nil {
		t.Fatal("CreateTable on an existing table with the wrong key: want an error")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := dedupedynamo.New(dedupedynamo.Config{Namespace: "x"}); err == nil {
		t.Error("no client: want an error")
	}
	if _, err := dedupedynamo.New(dedupedynamo.Config{Client: &dynamodb.Client{}}); err == nil {
		t.Error("no namespace: want an error")
	}
}

// TestStoreErrorsAreWrapped: a store error that is not a condition failure
// is returned, not mistaken for a lost claim.
func TestStoreErrorsAreWrapped(t *testing.T) {
	t.Parallel()
	client := testenv.Dynamo(t)
	s := newStore(t, client, "sqsonce-no-such-table", nil)
	ctx := context.Background()
	if _, err := s.Claim(ctx, "k", "fp", time.Second); err == nil {
		t.Fatal("claim on a missing table: want an error")
	}
	err := s.Complete(ctx, "k", "tok")
	if err == nil || errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("complete on a missing table: %v, want a store error", err)
	}
}
