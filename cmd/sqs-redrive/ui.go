package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/console"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
)

// uiUsage is the help of the ui command.
const uiUsage = `usage: sqs-redrive ui [-addr 127.0.0.1:PORT] [-read-only] [-queue-prefix P]

Serves the web console for one operator and prints, on its first line:
  console on http://127.0.0.1:PORT/?token=…
Every request needs that token; it stops on Ctrl-C or SIGTERM.

  -addr ADDR              where to listen (default 127.0.0.1:0: a free port on loopback)
  -read-only              no action: look only
  -queue-prefix P         only the queues named P… and their DLQs
  -backup-dir DIR         where a delete writes what it deletes first (default: the user cache
                          directory's sqs-redrive/deleted)
  -signing-key-env NAME   as for move: trust failure records the consumers signed
  -outbox-table T         show the DynamoDB outbox table T (pending, dead events)
  -keys-table T           look up Idempotency-Keys in the DynamoDB table T
  -keys-namespace NS      ... under the namespace NS (default idempotency)
and the global flags (--region, --profile, --endpoint-url, --visibility-timeout).
Each action is logged on stderr (who, action, queue, count), never a body.
`

// ui serves the web console until ctx ends.
func (a *app) ui(ctx context.Context, argv []string) error {
	fs := a.flags("ui")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	readOnly := fs.Bool("read-only", false, "no action")
	prefix := fs.String("queue-prefix", "", "queue name prefix")
	backup := fs.String("backup-dir", "", "where a delete writes what it deletes")
	keyEnv := fs.String("signing-key-env", "", "environment variable holding the consumers' dead-letter signing key")
	outboxTable := fs.String("outbox-table", "", "DynamoDB outbox table")
	keysTable := fs.String("keys-table", "", "DynamoDB idempotency table")
	keysNS := fs.String("keys-namespace", "", "idempotency key namespace")
	s, err := a.start(ctx, fs, argv, command{nargs: 0, shape: "no arguments", queueArg: -1, check: func([]string) error {
		return a.signingKey(*keyEnv)
	}})
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(a.stdout, uiUsage)
		return nil
	}
	if err != nil {
		return err
	}
	cfg := console.Config{Redriver: s.r, ReadOnly: *readOnly, QueuePrefix: *prefix, Logger: a.uiLogger()}
	if !*readOnly {
		dir := *backup
		if dir == "" {
			cache, err := os.UserCacheDir()
			if err != nil {
				return usageError("no user cache directory for deleted messages (%v): pass -backup-dir DIR", err)
			}
			dir = filepath.Join(cache, "sqs-redrive", "deleted")
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("backup directory: %w (pass -backup-dir DIR)", err)
		}
		cfg.BackupDir = dir
	}
	if *outboxTable != "" || *keysTable != "" {
		ddb, err := a.dynamo(ctx)
		if err != nil {
			return err
		}
		if *outboxTable != "" {
			box, err := outboxdynamo.New(outboxdynamo.Config{Client: ddb, Table: *outboxTable})
			if err != nil {
				return err
			}
			if err := box.Check(ctx); err != nil {
				return fmt.Errorf("-outbox-table: %w", err)
			}
			cfg.Outbox = box
		}
		if *keysTable != "" {
			keys, err := idemdynamo.New(idemdynamo.Config{Client: ddb, Table: *keysTable, Namespace: *keysNS})
			if err != nil {
				return err
			}
			if err := keys.Check(ctx); err != nil {
				return fmt.Errorf("-keys-table: %w", err)
			}
			cfg.Keys = keys
		}
	}
	c, err := console.New(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return usageError("-addr %s: %v", *addr, err)
	}
	host, port, _ := net.SplitHostPort(l.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	} else if !ip.IsLoopback() {
		fmt.Fprintf(a.stderr, "sqs-redrive: warning: listening on %s, not loopback: anyone who can reach it and learns the token can act on your queues\n", l.Addr())
	}
	fmt.Fprintf(a.stdout, "console on http://%s/?token=%s\n", net.JoinHostPort(host, port), c.Token())
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err = <-served:
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-served
	return nil
}

// uiLogger logs the console's actions on stderr at info level.
func (a *app) uiLogger() *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(a.stderr), zap.InfoLevel)
	return zap.New(core)
}

// dynamo returns a DynamoDB client configured as the SQS client is (the
// endpoint comes from AWS_ENDPOINT_URL_DYNAMODB, as for any SDK client).
func (a *app) dynamo(ctx context.Context) (*dynamodb.Client, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if a.g.region != "" {
		opts = append(opts, config.WithRegion(a.g.region))
	}
	if a.g.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(a.g.profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	return dynamodb.NewFromConfig(cfg), nil
}
