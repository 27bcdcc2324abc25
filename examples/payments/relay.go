package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
)

// relay publishes committed payments from the outbox to the queue until
// ctx ends. Each message carries the payment id as its sqsonce-id: a
// payment published twice (a relay killed between the send and the
// delete) is the same message to the worker's dedupe. Run one or several.
func relay(ctx context.Context, a *app) error {
	queueURL, err := a.queueURL(ctx)
	if err != nil {
		return err
	}
	box, err := outboxpg.New(outboxpg.Config{DB: a.pool})
	if err != nil {
		return err
	}
	if err := a.requireTables(ctx, box.Table()); err != nil {
		return err
	}
	// The listener holds a connection of its own, LISTENing on the
	// outbox's channel: each commit that Puts an event wakes the relay.
	// Close it when the relay stops, or the connection outlives it.
	l := box.Listener(a.pool)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := l.Close(cctx); err != nil {
			a.logger.Warn("payments relay: close the listener", zap.Error(err))
		}
	}()
	r, err := outbox.NewRelay(outbox.RelayConfig{
		Store:    box,
		Client:   a.sqs,
		QueueURL: queueURL,
		WaitFunc: l.Wait,
		// With a WaitFunc the poll only bounds how late a missed wake-up
		// (a lost connection, reconnected on the next Wait) is noticed.
		PollInterval: 30 * time.Second,
		Logger:       a.logger,
	})
	if err != nil {
		return err
	}
	a.logger.Info("payments relay started", zap.String("owner", r.Owner()))
	return r.Run(ctx)
}
