package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe/dynamo"
)

// workShutdownTimeout bounds the drain after SIGTERM/SIGINT: under ECS's
// default 30 s stopTimeout.
const workShutdownTimeout = 20 * time.Second

func cmdWork(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("work", stderr)
	concurrency := fs.Int("concurrency", 16, "handlers at once")
	visibility := fs.Duration("visibility", 0, "visibility timeout asked for on receive (whole seconds; 0: the queue's)")
	handlerDelay := fs.Duration("handler-delay", 0, "sleep inside the handler, to show the heartbeat at work")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error; debug logs one line per settled message")
	shutdown := fs.Duration("shutdown-timeout", workShutdownTimeout, "how long the drain waits for running handlers")
	var level zapcore.Level
	n, c, err := g.open(ctx, fs, args, func() error {
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return usagef("work: -log-level %q: use debug, info, warn or error", *logLevel)
		}
		if *concurrency < 1 {
			return usagef("work: -concurrency must be ≥ 1")
		}
		if *handlerDelay < 0 || *visibility < 0 || *shutdown <= 0 {
			return usagef("work: -handler-delay and -visibility must not be negative, -shutdown-timeout must be positive")
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
	store, err := dynamo.New(dynamo.Config{Client: c.ddb, Table: n.DedupeTable, Namespace: n.Queue, Logger: logger})
	if err != nil {
		return err
	}
	if err := store.Check(ctx); err != nil {
		return fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	delay := *handlerDelay
	apply := func(ctx context.Context, msg *consumer.Message) ([]ddbtypes.TransactWriteItem, error) {
		cr, err := parseCredit(msg.Body)
		if err != nil {
			return nil, consumer.Permanent(err)
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		return creditWrites(n.Ledger, cr), nil
	}
	cons, err := consumer.New(consumer.Config{
		Client:            c.sqs,
		QueueURL:          queueURL,
		Handler:           dynamo.Transactional(store, apply, nil),
		KeyFunc:           func(m *consumer.Message) string { return creditKey(m.Body) },
		Concurrency:       *concurrency,
		VisibilityTimeout: *visibility,
		ShutdownTimeout:   *shutdown,
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	logger.Info("ledger worker starting", zap.Int("concurrency", *concurrency), zap.Duration("handler_delay", delay))
	err = cons.Run(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Handlers still running at the shutdown timeout were cancelled and
		// their messages released: nothing is lost, the drain is over.
		logger.Warn("ledger worker: drain cut short at the shutdown timeout", zap.Error(err))
		return nil
	}
	return err
}
