// Command payments is a payments service on PostgreSQL and SQS built on
// sqsonce's public packages only: an API that takes payments behind the
// Idempotency-Key middleware, a relay that publishes them from an outbox,
// and a worker that books each one exactly once.
//
//	payments setup   create the queue, its DLQ, the schema and every table
//	payments serve   the API: POST /payments until SIGTERM [-addr HOST:PORT]
//	payments relay   publish committed payments from the outbox to the queue
//	payments work    book each payment into the ledger, once
//
// One payment's path:
//
//	client ── POST /payments, Idempotency-Key ──► serve
//	   one transaction: the key (held by the transaction), the payment row,
//	   its outbox event and the stored 201
//	relay ── woken by the commit's NOTIFY; sqsonce-id = the payment id ──► SQS
//	work  ── one transaction: the message's dedupe row and the ledger entry
//
// Every command takes -name NAME (default "payments"): the queue NAME, its
// dead-letter queue NAME-dlq and the PostgreSQL schema NAME that holds every
// table. PostgreSQL is DATABASE_URL; SQS comes from the AWS SDK's standard
// variables (AWS_REGION, AWS_ENDPOINT_URL_SQS, credentials). Logs are JSON
// lines on stderr. README.md runs it on the local stack.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/awsconfig"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: payments COMMAND [-name NAME] [flags]

commands:
  setup   create the queue NAME, its DLQ NAME-dlq, the schema NAME and its tables
  serve   the API until SIGTERM: POST /payments [-addr HOST:PORT (default 127.0.0.1:8080)]
          headers: Authorization: Bearer CALLER, Idempotency-Key: KEY
          body: {"account":"acct-42","amount":1250,"currency":"EUR","reference":"order 1001"}
  relay   publish committed payments from the outbox to the queue until SIGTERM
  work    book each payment into ledger_entries, once, until SIGTERM

PostgreSQL: DATABASE_URL. SQS: the AWS SDK's variables (AWS_REGION, AWS_ENDPOINT_URL_SQS, ...).
`

// validName is a name that suits a queue and a schema alike.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,60}$`)

// run is the whole program; exit codes: 0 ok, 1 failure, 2 usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "payments", "the queue and the schema `NAME`")
	addr := "127.0.0.1:8080"
	if cmd == "serve" {
		fs.StringVar(&addr, "addr", addr, "listen on `HOST:PORT` (port 0 picks a free one)")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 || !validName.MatchString(*name) {
		fmt.Fprintf(stderr, "payments: -name: 1 to 60 letters, digits, '-' or '_'; no arguments\n%s", usage)
		return 2
	}
	var command func(context.Context, *app) error
	switch cmd {
	case "setup":
		command = func(ctx context.Context, a *app) error { return setup(ctx, a, stdout) }
	case "serve":
		command = func(ctx context.Context, a *app) error { return serve(ctx, a, addr, stdout) }
	case "relay":
		command = relay
	case "work":
		command = work
	default:
		fmt.Fprintf(stderr, "payments: unknown command %q\n%s", cmd, usage)
		return 2
	}
	a, err := open(ctx, *name, cmd)
	if err == nil {
		err = command(ctx, a)
		a.close()
	}
	if err != nil {
		fmt.Fprintln(stderr, "payments:", err)
		return 1
	}
	return 0
}

// app is what every command uses: the names, a PostgreSQL pool whose
// sessions work in the schema NAME, an SQS client and a logger.
type app struct {
	name   string
	pool   *pgxpool.Pool
	sqs    *sqs.Client
	logger *zap.Logger
}

func open(ctx context.Context, name, role string) (*app, error) {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return nil, errors.New("DATABASE_URL is not set: set it to the PostgreSQL database (postgres://USER:PASSWORD@HOST:PORT/DB)")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The URL may hold a password: never print it.
		return nil, errors.New("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	// Unqualified tables are the schema's: sqsonce's stores and ours.
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{name}.Sanitize()
	cfg.ConnConfig.RuntimeParams["application_name"] = "payments " + role
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	awsCfg, err := awsconfig.Load(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	// JSON lines on stderr, unsampled: zap's production sampling would drop
	// most per-message lines under load.
	logCfg := zap.NewProductionConfig()
	logCfg.Sampling = nil
	logger, err := logCfg.Build()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("logger: %w", err)
	}
	return &app{name: name, pool: pool, sqs: sqs.NewFromConfig(awsCfg), logger: logger.With(zap.String("role", role))}, nil
}

func (a *app) close() {
	a.pool.Close()
	_ = a.logger.Sync()
}

// queueURL resolves the queue NAME.
func (a *app) queueURL(ctx context.Context) (string, error) {
	out, err := a.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(a.name)})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w (run `payments setup -name %s` first)", a.name, err, a.name)
	}
	return aws.ToString(out.QueueUrl), nil
}

// requireTables fails at start-up, saying what to run, when a table of
// the schema is missing.
func (a *app) requireTables(ctx context.Context, tables ...string) error {
	for _, t := range tables {
		var found bool
		if err := a.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{a.name, t}.Sanitize()).Scan(&found); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if !found {
			return fmt.Errorf("table %s.%s is missing: run `payments setup -name %s` first", a.name, t, a.name)
		}
	}
	return nil
}
