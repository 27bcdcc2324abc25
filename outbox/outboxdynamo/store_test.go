package outboxdynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/outbox/outboxtest"
)

// newTable makes a fresh outbox table on DynamoDB Local.
func newTable(t *testing.T) (*outboxdynamo.Store, func(cfg outboxdynamo.Config) *outboxdynamo.Store) {
	t.Helper()
	client := testenv.Dynamo(t)
	table := testenv.Name("outbox")
	if err := outboxdynamo.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	mk := func(cfg outboxdynamo.Config) *outboxdynamo.Store {
		if cfg.Client == nil {
			cfg.Client = client
		}
		cfg.Table = table
		st, err := outboxdynamo.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	return mk(outboxdynamo.Config{}), mk
}

func TestConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		clock := outboxtest.NewClock()
		_, mk := newTable(t)
		st := mk(outboxdynamo.Config{NowFunc: clock.Now, Lease: 10 * time.Second})
		return outboxtest.Harness{
			Store: st,
			Commit: func(ctx context.Context, evs ...outbox.Event) error {
				return st.Commit(ctx, func() ([]types.TransactWriteItem, error) { return st.Put(evs...) })
			},
			Clock: clock,
			Lease: 10 * time.Second,
		}
	})
}
