package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/outbox"
	outboxdynamo "github.com/sqsonce/sqsonce/outbox/dynamo"
)

func cmdRelay(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("relay", stderr)
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var level zapcore.Level
	n, c, err := g.open(ctx, fs, args, func() error {
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return usagef("relay: -log-level %q: use debug, info, warn or error", *logLevel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	logger, err := consumer.NewLogger(level)
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	logger = logger.With(zap.String("ledger", n.Queue))
	queueURL, err := c.queueURL(ctx, n.Queue)
	if err != nil {
		return err
	}
	if err := outboxdynamo.Check(ctx, c.ddb, n.Outbox); err != nil {
		return fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	box, err := outboxdynamo.New(outboxdynamo.Config{Client: c.ddb, Table: n.Outbox, Lease: 5 * time.Second})
	if err != nil {
		return err
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{
		Store:        box,
		Client:       c.sqs,
		QueueURL:     queueURL,
		PollInterval: 50 * time.Millisecond,
		Logger:       logger,
	})
	if err != nil {
		return err
	}
	logger.Info("ledger relay started", zap.String("owner", relay.Owner()))
	err = relay.Run(ctx)
	logger.Info("ledger relay stopped")
	return err
}
