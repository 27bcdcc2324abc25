package main

import (
	"context"
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/producer"
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
	defer c.close()
	logger, err := newLogger(level)
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	logger = logger.With(zap.String("ledger", n.Queue))
	queueURL, err := c.queueURL(ctx, n.Queue)
	if err != nil {
		return err
	}
	box, err := openOutbox(ctx, n, c, 5*time.Second)
	if err != nil {
		return err
	}
	cfg := outbox.RelayConfig{
		Store:        box,
		Client:       c.sqs,
		QueueURL:     queueURL,
		PollInterval: 50 * time.Millisecond,
		Logger:       logger,
		Payload:      producer.PayloadConfig{S3Client: c.s3, Bucket: n.Bucket},
	}
	if pg, ok := box.(*outboxpg.Store); ok {
		// On PostgreSQL a commit's NOTIFY wakes the relay at once; the
		// poll only bounds how late a missed wake-up is noticed.
		l := pg.Listener(c.pg)
		defer func() { _ = l.Close(context.WithoutCancel(ctx)) }()
		cfg.WaitFunc, cfg.PollInterval = l.Wait, 5*time.Second
	}
	relay, err := outbox.NewRelay(cfg)
	if err != nil {
		return err
	}
	logger.Info("ledger relay started", zap.String("owner", relay.Owner()))
	err = relay.Run(ctx)
	logger.Info("ledger relay stopped")
	return err
}
