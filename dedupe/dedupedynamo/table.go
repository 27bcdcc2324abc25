package dedupedynamo

import (
	"context"

	"github.com/sqsonce/sqsonce/internal/dynamotable"
)

// schema is the dedupe table's: the lease-record table the idempotency
// store uses too.
var schema = dynamotable.Lease("dedupedynamo", "dedupe table")

// CreateTable creates the dedupe table if it does not exist: on-demand
// billing, partition key pk (S), TTL enabled on expires_at. It waits until
// the table is ACTIVE and checks the key schema of a table that already
// existed. It is idempotent: run it from setup code or tests as often as
// you like.
func CreateTable(ctx context.Context, client DynamoDBAPI, table string) error {
	return dynamotable.Create(ctx, client, table, schema)
}
