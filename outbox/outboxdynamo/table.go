package outboxdynamo

import (
	"context"

	"github.com/sqsonce/sqsonce/internal/dynamotable"
)

// schema is the outbox table's.
var schema = dynamotable.Schema{Hash: attrPK, Range: attrSK, TTL: attrExpiresAt, Prefix: "outboxdynamo", What: "outbox table"}

// CreateTable creates the outbox table if it does not exist: on-demand
// billing, partition key pk (S) and sort key sk (S), TTL on expires_at. It
// waits until the table is ACTIVE and checks the key schema of a table
// that already existed. It is idempotent.
func CreateTable(ctx context.Context, client DynamoDBAPI, table string) error {
	return dynamotable.Create(ctx, client, table, schema)
}

// Check verifies that the outbox table exists and is keyed by pk (S, HASH)
// and sk (S, RANGE): run it at start-up for an error that says what to
// fix.
func (st *Store) Check(ctx context.Context) error {
	return dynamotable.Check(ctx, st.cfg.Client, st.cfg.Table, schema)
}
