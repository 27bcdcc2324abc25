package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/examples/orders"
	"github.com/sqsonce/sqsonce/opshttp"
)

// settings is the worker's configuration.
type settings struct {
	queueURL        string
	queueName       string
	concurrency     int
	visibility      time.Duration
	dedupeTable     string
	logLevel        zapcore.Level
	shutdownTimeout time.Duration
	maxAttempts     int
	httpAddr        string
	handlerDelay    time.Duration
}

// parseSettings reads flags, each defaulting to its environment variable.
func parseSettings(args []string, getenv func(string) string, stderr io.Writer) (settings, error) {
	var s settings
	var errs []error
	envInt := func(name string, def int) int {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not an integer", name, v))
		}
		return n
	}
	envDuration := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a duration (use 30s, 2m)", name, v))
		}
		return d
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.queueURL, "queue-url", getenv("QUEUE_URL"), "queue `URL` [QUEUE_URL]")
	fs.StringVar(&s.queueName, "queue", getenv("QUEUE_NAME"), "queue `NAME`, when no URL is given [QUEUE_NAME]")
	fs.IntVar(&s.concurrency, "concurrency", envInt("CONCURRENCY", consumer.DefaultConcurrency), "handlers at once [CONCURRENCY]")
	fs.DurationVar(&s.visibility, "visibility", envDuration("VISIBILITY", 0), "visibility timeout, whole seconds; 0: the queue's [VISIBILITY]")
	fs.StringVar(&s.dedupeTable, "dedupe-table", getenv("DEDUPE_TABLE"), "DynamoDB dedupe `table`; empty: no dedupe [DEDUPE_TABLE]")
	level := fs.String("log-level", cmp.Or(getenv("LOG_LEVEL"), "info"), "debug, info, warn or error; debug logs one line per settled message [LOG_LEVEL]")
	fs.DurationVar(&s.shutdownTimeout, "shutdown-timeout", envDuration("SHUTDOWN_TIMEOUT", consumer.DefaultShutdownTimeout), "how long the drain waits for running handlers [SHUTDOWN_TIMEOUT]")
	fs.StringVar(&s.httpAddr, "http-addr", getenv("HTTP_ADDR"), "serve /metrics, /healthz and /readyz on `HOST:PORT` (\":9090\" in a container); empty: off [HTTP_ADDR]")
	fs.DurationVar(&s.handlerDelay, "handler-delay", envDuration("HANDLER_DELAY", 0), "sleep before each handler, to watch the drain [HANDLER_DELAY]")
	fs.IntVar(&s.maxAttempts, "max-attempts", envInt("MAX_ATTEMPTS", 0), "dead-letter after this many transient failures; 0: no limit [MAX_ATTEMPTS]")
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := s.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return s, fmt.Errorf("-log-level %q: use debug, info, warn or error", *level)
	}
	if s.queueURL == "" && s.queueName == "" {
		return s, errors.New("set -queue-url (QUEUE_URL) or -queue (QUEUE_NAME)")
	}
	if s.concurrency < 1 || s.maxAttempts < 0 || s.visibility < 0 || s.shutdownTimeout <= 0 || s.handlerDelay < 0 {
		return s, errors.New("-concurrency must be ≥ 1, -max-attempts, -visibility and -handler-delay not negative, -shutdown-timeout positive")
	}
	return s, nil
}

// newLogger returns a JSON logger on w without sampling, so every
// "settled" line is kept at debug level.
func newLogger(w io.Writer, level zapcore.Level) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level))
}

// run is the whole program; exit codes: 0 ok (including a drained
// shutdown), 1 failure, 2 bad configuration.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	s, err := parseSettings(args, getenv, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "worker: %v\n", err)
		}
		return 2
	}
	logger := newLogger(stderr, s.logLevel)
	defer func() { _ = logger.Sync() }()
	if err := work(ctx, s, getenv, logger); err != nil {
		logger.Error("worker stopped", zap.Error(err))
		return 1
	}
	return 0
}

func work(ctx context.Context, s settings, getenv func(string) string, logger *zap.Logger) error {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS config: %w", err)
	}
	obs, err := newObservability(ctx, s.httpAddr != "", getenv)
	if err != nil {
		return err
	}
	defer obs.close()
	var mw []consumer.Middleware
	if s.handlerDelay > 0 {
		mw = append(mw, delay(s.handlerDelay))
	}
	if s.dedupeTable != "" {
		store, err := dedupedynamo.New(dedupedynamo.Config{
			// A connection kept for each handler: the SDK keeps 10 per
			// host, and each call beyond them would open its own.
			Client: dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
				o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
					t.MaxIdleConnsPerHost = max(s.concurrency, awshttp.DefaultHTTPTransportMaxIdleConnsPerHost)
				})
			}),
			Table:     s.dedupeTable,
			Namespace: cmp.Or(s.queueName, s.queueURL),
			Logger:    logger,
		})
		if err != nil {
			return err
		}
		if err := store.Check(ctx); err != nil {
			return err
		}
		dd, err := dedupe.New(dedupe.Config{Store: store, Logger: logger, MeterProvider: obs.mp})
		if err != nil {
			return err
		}
		mw = append(mw, dd.Wrap)
	}
	c, err := consumer.New(consumer.Config{
		Client:            sqs.NewFromConfig(awsCfg),
		QueueURL:          s.queueURL,
		QueueName:         s.queueName,
		Handler:           orders.Handler(logger),
		Middleware:        mw,
		Concurrency:       s.concurrency,
		VisibilityTimeout: s.visibility,
		ShutdownTimeout:   s.shutdownTimeout,
		MaxAttempts:       s.maxAttempts,
		Logger:            logger,
		TracerProvider:    obs.tp,
		MeterProvider:     obs.mp,
	})
	if err != nil {
		return err
	}
	if s.httpAddr != "" {
		// /readyz is 200 once Run's start-up checks pass, and 503 from
		// SIGTERM on (the drain) and while receives fail. The endpoints
		// stop after Run returned, so that they answer through the drain.
		srv, err := opshttp.Listen(s.httpAddr, opshttp.Config{Ready: []opshttp.Readier{c}, Metrics: obs.metrics})
		if err != nil {
			return fmt.Errorf("-http-addr: %w", err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		}()
		logger.Info("worker: serving /metrics, /healthz and /readyz", zap.String("http_addr", srv.Addr().String()))
	}
	logger.Info("worker starting",
		zap.String("queue", cmp.Or(s.queueURL, s.queueName)),
		zap.Int("concurrency", s.concurrency),
		zap.Bool("dedupe", s.dedupeTable != ""))
	err = c.Run(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Handlers still running at the shutdown timeout were cancelled and
		// their messages released: nothing is lost.
		logger.Warn("worker: drain cut short at the shutdown timeout", zap.Error(err))
		return nil
	}
	if err != nil {
		return err
	}
	logger.Info("worker drained")
	return nil
}

// delay sleeps before each handler (or until the handler's context ends).
func delay(d time.Duration) consumer.Middleware {
	return func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			return next.Handle(ctx, m)
		})
	}
}
