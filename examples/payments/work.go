package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
)

// work books payments from the queue until ctx ends, then drains. A
// message's key is its sqsonce-id (consumer.DefaultKey), which the relay
// sets to the payment id.
func work(ctx context.Context, a *app) error {
	if err := a.requireTables(ctx, "ledger_entries"); err != nil {
		return err
	}
	store, err := dedupepg.New(dedupepg.Config{DB: a.pool, Namespace: a.name, Logger: a.logger})
	if err != nil {
		return err
	}
	if err := store.Check(ctx); err != nil {
		return err
	}
	c, err := consumer.New(consumer.Config{
		Client:    a.sqs,
		QueueName: a.name,
		// The dedupe row and the booking commit in one transaction: a
		// redelivery, a payment the relay published twice or a redriven
		// dead letter is acked as a duplicate and books nothing.
		Handler: dedupepg.Transactional(store, book, nil),
		Logger:  a.logger,
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// book writes the payment's ledger entry in tx, the transaction that
// holds the message's dedupe row. It neither commits nor rolls back.
func book(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
	var p payment
	if err := json.Unmarshal([]byte(msg.Body), &p); err != nil {
		return consumer.Permanent(fmt.Errorf("not a payment: %w", err)) // to the DLQ, with the reason
	}
	if p.ID == "" || p.Account == "" || p.Amount <= 0 {
		return consumer.Permanent(errors.New("not a payment: id, account or amount missing"))
	}
	_, err := tx.Exec(ctx, `INSERT INTO ledger_entries (payment_id, account, amount, currency) VALUES ($1, $2, $3, $4)`,
		p.ID, p.Account, p.Amount, p.Currency)
	return err
}
