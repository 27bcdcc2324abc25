package idemdynamo_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
	"github.com/sqsonce/sqsonce/idempotency/idemtest"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// newTable creates a key table with CreateTable, dropped when the test
// ends.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	return testenv.StoreTable(t, "sqsonce-idem-test", idemdynamo.CreateTable)
}

func newStore(t *testing.T, client idemdynamo.DynamoDBAPI, table string, now func() time.Time) *idemdynamo.Store {
	t.Helper()
	s, err := idemdynamo.New(idemdynamo.Config{Client: client, Table: table, Namespace: "conformance", NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	client, table := newTable(t)
	idemtest.Run(t, func(t *testing.T, now func() time.Time) idempotency.Store {
		return newStore(t, client, table, now)
	})
}

// TestRecordSchema: the item holds the dedupe record's attributes, the
// response, and neither the key nor the scope.
func TestRecordSchema(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	now := time.Unix(1_900_000_000, 0)
	s := newStore(t, client, table, func() time.Time { return now })
	ctx := context.Background()
	rk := idempotency.RecordKey("user-7", "order-1")
	c, err := s.Claim(ctx, rk, "fp", time.Minute)
	if err != nil || c.Status != idempotency.Claimed {
		t.Fatalf("claim: %v %v", c, err)
	}
	pk := "conformance#" + rk
	item := testenv.Item(t, client, table, pk)
	want := map[string]string{
		"status": "IN_PROGRESS", "token": c.Token, "fingerprint": "fp",
		"lease_until": "1900000060000", "expires_at": "1900086400",
	}
	for k, v := range want {
		if got := testenv.Scalar(item[k]); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	resp := idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}
	if err := s.Complete(ctx, rk, c.Token, idempotency.Completion{Response: resp}); err != nil {
		t.Fatal(err)
	}
	item = testenv.Item(t, client, table, pk)
	if testenv.Scalar(item["status"]) != "COMPLETED" || item["lease_until"] != nil || testenv.Scalar(item["response_status"]) != "201" {
		t.Errorf("completed item: %v", item)
	}
	if b, ok := item["response_body"].(*types.AttributeValueMemberB); !ok || string(b.Value) != `{"ok":true}` {
		t.Errorf("response_body = %v", item["response_body"])
	}
	for name, v := range item {
		if s := testenv.Scalar(v); strings.Contains(s, "user-7") || strings.Contains(s, "order-1") || strings.Contains(name, "user-7") {
			t.Errorf("attribute %s holds the scope or the key in clear: %q", name, s)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	ctx := context.Background()
	if err := newStore(t, client, table, nil).Check(ctx); err != nil {
		t.Fatalf("Check on a CreateTable table: %v", err)
	}
	if err := idemdynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("CreateTable again: %v", err)
	}
	missing := newStore(t, client, "sqsonce-no-such-table", nil).Check(ctx)
	if missing == nil || !strings.Contains(missing.Error(), "sqsonce-no-such-table") || !strings.Contains(missing.Error(), "CreateTable") {
		t.Fatalf("missing table: %v", missing)
	}
	wrong := testenv.Table(t, client, "sqsonce-wrong", "id", "")
	if err := newStore(t, client, wrong, nil).Check(ctx); err == nil || !strings.Contains(err.Error(), wrong) {
		t.Fatalf("wrong key schema: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := idemdynamo.New(idemdynamo.Config{}); err == nil {
		t.Error("no client: want an error")
	}
	s, err := idemdynamo.New(idemdynamo.Config{Client: &dynamodb.Client{}})
	if err != nil || s.Table() != idemdynamo.DefaultTable || s.PK("k") != idemdynamo.DefaultNamespace+"#k" {
		t.Errorf("defaults: %v %v", s, err)
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
	err := s.Complete(ctx, "k", "tok", idempotency.Completion{})
	if err == nil || errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("complete on a missing table: %v, want a store error", err)
	}
}
