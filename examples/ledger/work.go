package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/limit"
	"github.com/sqsonce/sqsonce/limit/limitdynamo"
	"github.com/sqsonce/sqsonce/limit/limitpg"
	"github.com/sqsonce/sqsonce/step"
)

// workShutdownTimeout bounds the drain after SIGTERM/SIGINT: under ECS's
// default 30 s stopTimeout.
const workShutdownTimeout = 20 * time.Second

func cmdWork(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("work", stderr)
	concurrency := fs.Int("concurrency", 16, "handlers at once")
	visibility := fs.Duration("visibility", 0, "visibility timeout asked for on receive (whole seconds; 0: the queue's)")
	handlerDelay := fs.Duration("handler-delay", 0, "sleep inside the handler, to show the heartbeat at work")
	txDelay := fs.Duration("tx-delay", 0, "-store postgres: sleep inside the transaction before its commit, to make a backend killed mid-transaction observable")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error; debug logs one line per settled message")
	shutdown := fs.Duration("shutdown-timeout", workShutdownTimeout, "how long the drain waits for running handlers")
	wait := fs.Duration("wait", 0, "long-poll wait of each receive (whole seconds, 1s to 20s; 0: 20s)")
	bankURL := fs.String("bank", "", "charge each credit at the bank at `URL` (ledger bank) before applying it, as a recorded step")
	bankPolicy := fs.String("bank-policy", "", "with -bank: a charge whose outcome is unknown is reconciled (GET /charges/ID), rerun or parked (`P`: reconcile, rerun or park; default reconcile)")
	lease := fs.Duration("lease", 0, "with -bank: the credit record's lease, after which a dead worker's credit is taken over (0: 1m)")
	backPressure := fs.Bool("back-pressure", true, "pause receiving while the bank answers 429/503 (consumer.Unavailable) or fails often (the breaker); false: those are ordinary transient failures, retried with the backoff")
	rateN := fs.Float64("rate", 0, "start at most `N` credits per second, every worker of this ledger together (kept in the -store); 0: no limit")
	accountConcurrency := fs.Int("account-concurrency", 0, "run at most `K` credits of one account at once, every worker of this ledger together (kept in the -store); 0: no limit")
	adaptive := fs.Bool("adaptive", false, "with -rate: lower the rate when the bank answers 429 and bring it back when it stops (AIMD)")
	var (
		level  zapcore.Level
		policy = step.Reconcile
	)
	n, c, err := g.open(ctx, fs, args, func() error {
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return usagef("work: -log-level %q: use debug, info, warn or error", *logLevel)
		}
		if *concurrency < 1 {
			return usagef("work: -concurrency must be ≥ 1")
		}
		if *txDelay < 0 || (*txDelay > 0 && g.store != storePostgres) {
			return usagef("work: -tx-delay must not be negative, and needs -store postgres")
		}
		if *handlerDelay < 0 || *visibility < 0 || *shutdown <= 0 {
			return usagef("work: -handler-delay and -visibility must not be negative, -shutdown-timeout must be positive")
		}
		if *bankURL == "" && (*bankPolicy != "" || *lease != 0) {
			return usageError{errNoCharger}
		}
		if *bankPolicy != "" {
			p, err := step.ParsePolicy(*bankPolicy)
			if err != nil {
				return usagef("work: -bank-policy %q: use reconcile, rerun or park", *bankPolicy)
			}
			policy = p
		}
		if *lease < 0 {
			return usagef("work: -lease must not be negative")
		}
		if *bankURL != "" {
			if _, err := newBankClient(*bankURL, *concurrency); err != nil {
				return err
			}
		}
		if !(*rateN >= 0 && *rateN <= 1e9) || *accountConcurrency < 0 {
			return usagef("work: -rate must be credits per second from 0 (no limit) to 1e9, -account-concurrency must not be negative")
		}
		if *adaptive && *rateN == 0 {
			return usagef("work: -adaptive adapts -rate: set -rate too")
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
	delay := *handlerDelay
	var ch *charger
	if *bankURL != "" {
		bank, err := newBankClient(*bankURL, *concurrency)
		if err != nil {
			return err
		}
		bank.backPressure = *backPressure
		ch = &charger{bank: bank, policy: policy, lease: *lease, logger: logger}
	}
	var handler consumer.Handler
	if n.Store == storePostgres {
		handler, err = postgresHandler(ctx, n, c, logger, delay, *txDelay, ch)
	} else {
		handler, err = dynamoHandler(ctx, n, c, logger, delay, ch)
	}
	if err != nil {
		return err
	}
	limits, err := workLimits(ctx, n, c, logger, *rateN, *accountConcurrency, *adaptive)
	if err != nil {
		return err
	}
	sqsClient := &countedSQS{SQSAPI: c.sqs, log: logger}
	cons, err := consumer.New(consumer.Config{
		Client:            sqsClient,
		QueueURL:          queueURL,
		Handler:           handler,
		KeyFunc:           func(m *consumer.Message) string { return creditKey(m.Body) },
		Concurrency:       *concurrency,
		VisibilityTimeout: *visibility,
		WaitTime:          *wait,
		ShutdownTimeout:   *shutdown,
		Logger:            logger,
		// Credits sent with -memo-bytes or -compress (bodies in S3,
		// compressed bodies) are read before the handler, and those sent
		// with -not-before are held until their time: no flag.
		Payload: consumer.PayloadConfig{S3Client: c.s3},
		// Off: a 429/503 is a plain failure (the bank client says so), and
		// no breaker pauses the worker either.
		BackPressure: consumer.BackPressure{Off: !*backPressure},
		Limits:       limits,
	})
	if err != nil {
		return err
	}
	logger.Info("ledger worker starting", zap.Int("concurrency", *concurrency), zap.Duration("handler_delay", delay),
		zap.Bool("bank", ch != nil), zap.Stringer("bank_policy", policy), zap.Bool("back_pressure", *backPressure),
		zap.Float64("rate", *rateN), zap.Int("account_concurrency", *accountConcurrency), zap.Bool("adaptive", *adaptive))
	err = cons.Run(ctx)
	logger.Info("ledger worker stopped", zap.Int64("receives", sqsClient.receives.Load()))
	if errors.Is(err, context.DeadlineExceeded) {
		// Handlers still running at the shutdown timeout were cancelled and
		// their messages released: nothing is lost, the drain is over.
		logger.Warn("ledger worker: drain cut short at the shutdown timeout", zap.Error(err))
		return nil
	}
	return err
}

// workLimits is the fleet's limits of `work -rate/-account-concurrency`,
// kept in the ledger's store (setup creates what they need) under the
// queue's name: every worker of the ledger shares them.
func workLimits(ctx context.Context, n names, c clients, logger *zap.Logger, rate float64, perAccount int, adaptive bool) (consumer.Limits, error) {
	if rate == 0 && perAccount == 0 {
		return consumer.Limits{}, nil
	}
	var store limit.Store
	if n.Store == storePostgres {
		s, err := limitpg.New(limitpg.Config{DB: c.pg, Logger: logger})
		if err != nil {
			return consumer.Limits{}, err
		}
		if err := s.Check(ctx); err != nil {
			return consumer.Limits{}, fmt.Errorf("%w (run `ledger -store postgres setup` first)", err)
		}
		store = s
	} else {
		s, err := limitdynamo.New(limitdynamo.Config{Client: c.ddb, Table: n.LimitsTable, Logger: logger})
		if err != nil {
			return consumer.Limits{}, err
		}
		if err := s.Check(ctx); err != nil {
			return consumer.Limits{}, fmt.Errorf("%w (run `ledger setup` first)", err)
		}
		store = s
	}
	l := consumer.Limits{Rate: rate, Store: store, Name: n.Queue, Adaptive: consumer.Adaptive{On: adaptive}}
	if perAccount > 0 {
		l.KeyLimitFunc = func(m *consumer.Message) (string, int) {
			cr, err := parseCredit(m.Body)
			if err != nil {
				return "", 0 // dead-lettered by the handler, which needs no slot
			}
			return cr.Account, perAccount
		}
	}
	return l, nil
}

// dynamoHandler applies a credit with one TransactWriteItems: the dedupe
// record, the balance and the journal row. With a charger the credit is
// charged first, under a claim of its record that the transaction then
// completes.
func dynamoHandler(ctx context.Context, n names, c clients, logger *zap.Logger, delay time.Duration, ch *charger) (consumer.Handler, error) {
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: c.ddb, Table: n.DedupeTable, Namespace: n.Queue, Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := store.Check(ctx); err != nil {
		return nil, fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	apply := func(ctx context.Context, msg *consumer.Message) ([]ddbtypes.TransactWriteItem, error) {
		cr, err := parseCredit(msg.Body)
		if err != nil {
			return nil, consumer.Permanent(err)
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
		return creditWrites(n.Ledger, cr, time.Now()), nil
	}
	tx := dedupedynamo.Transactional(store, apply, nil)
	if ch != nil {
		return ch.wrap(store, tx)
	}
	return tx, nil
}

// postgresHandler applies a credit in one PostgreSQL transaction: the
// dedupe row first, then the balance and the journal row. The handler
// delay runs before the transaction, so a slow handler holds no
// connection; txDelay runs inside it, after the credit's statements. With
// a charger the credit is charged first, under a claim of its record that
// the transaction then completes.
func postgresHandler(ctx context.Context, n names, c clients, logger *zap.Logger, delay, txDelay time.Duration, ch *charger) (consumer.Handler, error) {
	store, err := dedupepg.New(dedupepg.Config{DB: c.pg, Namespace: n.Queue, Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := checkPostgres(ctx, c.pg, n.Schema); err != nil {
		return nil, err
	}
	if err := store.Check(ctx); err != nil {
		return nil, fmt.Errorf("%w (run `ledger -store postgres setup` first)", err)
	}
	tx := dedupepg.Transactional(store, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		cr, err := parseCredit(msg.Body)
		if err != nil {
			return consumer.Permanent(err)
		}
		if err := applyCreditTx(ctx, tx, cr); err != nil {
			return err
		}
		return sleep(ctx, txDelay)
	}, nil)
	h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		if _, err := parseCredit(msg.Body); err != nil {
			return consumer.Permanent(err) // no transaction for a message that can never apply
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		return tx.Handle(ctx, msg)
	})
	if ch != nil {
		return ch.wrap(store, h)
	}
	return h, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// countedSQS counts the worker's ReceiveMessage calls and logs each at
// debug level ("ledger: receive"), so that the calls a worker made while
// paused can be read from its log even after a SIGKILL.
type countedSQS struct {
	consumer.SQSAPI
	log      *zap.Logger
	receives atomic.Int64
}

func (c *countedSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.receives.Add(1)
	c.log.Debug("ledger: receive", zap.Int32("max_messages", in.MaxNumberOfMessages))
	return c.SQSAPI.ReceiveMessage(ctx, in, optFns...)
}
