package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/awsconfig"
	"github.com/sqsonce/sqsonce/awsconfig/dynamoclient"
	"github.com/sqsonce/sqsonce/awsconfig/s3client"
)

// global holds the flags every subcommand takes.
type global struct {
	name   string
	fifo   bool
	store  string // "dynamodb" or "postgres"
	bucket string // "" means derived from name
}

// The stores the ledger keeps its balances, journal, dedupe records, outbox
// and idempotency keys in.
const (
	storeDynamoDB = "dynamodb"
	storePostgres = "postgres"
)

func newGlobal() *global { return &global{name: "ledger", store: storeDynamoDB} }

// flagSet returns a flag set with the global flags bound, so they may stand
// before or after the subcommand.
func (g *global) flagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&g.name, "queue", g.name, "ledger `NAME`: the queue; every other resource name derives from it")
	fs.BoolVar(&g.fifo, "fifo", g.fifo, "use the FIFO queue NAME.fifo (message group = account)")
	fs.StringVar(&g.store, "store", g.store, "where the ledger's data lives: dynamodb, or postgres (DATABASE_URL; one schema per ledger)")
	fs.StringVar(&g.bucket, "bucket", g.bucket, "S3 `BUCKET` for credits too large for a message (default: NAME-payloads in lower case; bucket names are global on AWS)")
	return fs
}

// usageError marks a bad command line (exit code 2).
type usageError struct{ error }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// parse parses a subcommand's flags and rejects positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError{err}
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// open parses a subcommand's flags, runs check on them (a bad command line
// is reported before any configuration problem), and returns the ledger's
// resource names and SDK clients.
func (g *global) open(ctx context.Context, fs *flag.FlagSet, args []string, check func() error) (names, clients, error) {
	if err := parse(fs, args); err != nil {
		return names{}, clients{}, err
	}
	if check != nil {
		if err := check(); err != nil {
			return names{}, clients{}, err
		}
	}
	n, err := g.names()
	if err != nil {
		return names{}, clients{}, err
	}
	c, err := newClients(ctx)
	if err != nil || n.Store != storePostgres {
		return n, c, err
	}
	c.pg, err = openPostgres(ctx, n.Schema, "ledger "+fs.Name()+" "+n.Queue)
	return n, c, err
}

// names are the resources of one ledger.
type names struct {
	Queue, DLQ          string
	DedupeTable, Ledger string // Ledger is the accounts table
	// IdempotencyTable holds the API's Idempotency-Key records; Outbox the
	// credits the API accepted, until the relay has sent them to Queue.
	IdempotencyTable, Outbox string
	// Bucket holds the bodies of credits too large for a message.
	Bucket string
	FIFO   bool
	// Store is "dynamodb" or "postgres"; Schema the ledger's PostgreSQL
	// schema, which holds all its tables there.
	Store, Schema string
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,60}$`)

func (g *global) names() (names, error) {
	if !validName.MatchString(g.name) {
		return names{}, usagef("-queue %q: use 1 to 60 letters, digits, '-' or '_' (the .fifo suffix comes from -fifo)", g.name)
	}
	if g.store != storeDynamoDB && g.store != storePostgres {
		return names{}, usagef("-store %q: use dynamodb or postgres", g.store)
	}
	base := g.name
	if g.fifo {
		base += "-fifo"
	}
	n := names{Queue: g.name, DLQ: g.name + "-dlq", DedupeTable: base + "-dedupe", Ledger: base + "-accounts",
		IdempotencyTable: base + "-idempotency", Outbox: base + "-outbox", FIFO: g.fifo, Store: g.store, Schema: base,
		Bucket: g.bucket}
	if n.Bucket == "" {
		n.Bucket = bucketName(base)
	}
	if g.store == storePostgres {
		n.DedupeTable, n.Ledger = qualified(base, pgDedupeTable), qualified(base, tableAccounts)
		n.IdempotencyTable, n.Outbox = qualified(base, pgIdempotencyTable), qualified(base, pgOutboxTable)
		if len(base) > maxIdentifier {
			return names{}, usagef("-queue %q: with -store postgres the schema %q must fit PostgreSQL's %d-byte names", g.name, base, maxIdentifier)
		}
	}
	if g.fifo {
		n.Queue += ".fifo"
		n.DLQ += ".fifo"
	}
	return n, nil
}

// bucketName derives a bucket name from a ledger's base name: S3 takes
// lower-case letters, digits and hyphens, 3 to 63 of them.
func bucketName(base string) string {
	b := strings.Trim(strings.ToLower(strings.ReplaceAll(base, "_", "-")), "-")
	return strings.Trim(b[:min(len(b), 54)], "-") + "-payloads"
}

// clients are the SDK clients, configured from the standard variables.
type clients struct {
	sqs *sqs.Client
	ddb *dynamodb.Client
	// s3 reads and writes the bodies of credits too large for a message
	// (path-style on an emulator); region is where a new bucket goes.
	s3     *s3.Client
	region string
	pg     *pgxpool.Pool // with -store postgres: on the ledger's schema
}

// close closes the PostgreSQL pool, if any.
func (c clients) close() {
	if c.pg != nil {
		c.pg.Close()
	}
}

func newClients(ctx context.Context) (clients, error) {
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return clients{}, err
	}
	return clients{sqs: sqs.NewFromConfig(cfg), ddb: dynamodb.NewFromConfig(cfg, dynamoclient.Options), s3: s3client.New(cfg), region: cfg.Region}, nil
}

func (c clients) queueURL(ctx context.Context, name string) (string, error) {
	out, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w (run `ledger setup` first)", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}
