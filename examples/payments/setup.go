package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/pgstore"
	"github.com/sqsonce/sqsonce/producer"
)

// schemaSQL creates the service's own tables. sqsonce's tables come from
// pgstore.Migrate.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS payments (
    id         text        PRIMARY KEY, -- also the outbox event's id, the message's sqsonce-id
    caller     text        NOT NULL,
    account    text        NOT NULL,
    amount     bigint      NOT NULL CHECK (amount > 0), -- in minor units (cents)
    currency   text        NOT NULL,
    reference  text        NOT NULL,
    created_at timestamptz NOT NULL
);
-- One row per booking. Nothing here stops a second row for a payment: the
-- dedupe row, committed in the same transaction, is what keeps it at one.
CREATE TABLE IF NOT EXISTS ledger_entries (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id text        NOT NULL,
    account    text        NOT NULL,
    amount     bigint      NOT NULL,
    currency   text        NOT NULL,
    booked_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ledger_entries_payment_id ON ledger_entries (payment_id);`

// setup creates the queue and its DLQ, the schema, sqsonce's tables (one
// Migrate call for the three stores) and the service's tables. Every step
// may run again: run it from a deploy step, with a role that may create
// tables; serve, relay and work only check that the tables are there.
func setup(ctx context.Context, a *app, stdout io.Writer) error {
	if _, err := producer.CreateQueue(ctx, a.sqs, producer.QueueConfig{
		Name:              a.name,
		DeadLetterName:    a.name + "-dlq",
		VisibilityTimeout: 30 * time.Second,
		MaxReceiveCount:   5, // SQS's own backstop behind the worker's retries
	}); err != nil {
		return err
	}
	if _, err := a.pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{a.name}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", a.name, err)
	}
	if _, err := pgstore.Migrate(ctx, a.pool, pgstore.Idempotency, pgstore.Outbox, pgstore.Dedupe); err != nil {
		return err
	}
	if _, err := a.pool.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("postgres: create the tables: %w", err)
	}
	fmt.Fprintf(stdout, "setup: queue %s (dead letters to %s), schema %s with payments, ledger_entries and sqsonce's tables: ready\n",
		a.name, a.name+"-dlq", a.name)
	return nil
}
