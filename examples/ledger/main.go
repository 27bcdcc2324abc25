// Command ledger is the exactly-once ledger: credits sent through SQS are
// applied to account balances in DynamoDB, each credit id exactly once,
// however often SQS delivers it and whoever sends it again.
//
//	ledger setup                      create the queue, its DLQ and the tables
//	ledger send -n N [-accounts K] [-dup-rate R] [-bad-rate R] [-json]
//	ledger work [-concurrency C] [-visibility D] [-handler-delay D] [-log-level L]
//	            [-bank URL [-bank-policy reconcile|rerun|park] [-lease D] [-back-pressure=false]]
//	            [-rate N [-adaptive]] [-account-concurrency K]
//	                                  with -bank: charge each credit at the bank first (charge.go);
//	                                  -rate and -account-concurrency are the fleet's limits,
//	                                  kept in the -store
//	ledger unknown [-resolve CREDIT=applied|not-applied] [-json]
//	                                  credits whose charge has an unknown outcome, and a person's decision
//	ledger balances [-json]
//	ledger status [-json]             queue, in-flight and DLQ counts
//	ledger audit [-json]              prove from the journal that no credit was applied twice
//	ledger serve [-addr HOST:PORT] [-handler-delay D] [-lease D] [-log-level L]
//	                                  the HTTP API: POST /credits with Idempotency-Key
//	ledger relay [-log-level L]       publish the API's credits from the outbox to the queue
//	ledger post -servers URL[,URL] [-n N] [-accounts K] [-sequential] [-json]
//	                                  a client of serve, retrying keys as real clients do
//	ledger outbox [-requeue] [-discard ID] [-json]
//	                                  pending and parked events of the outbox
//	ledger bank [-addr HOST:PORT] [-idempotent=true|false] [-outage-every D -outage-for D]
//	            [-rate N] [-drop-rate R] [-delay D]
//	                                  a toy bank to charge credits at: POST /charges with
//	                                  Idempotency-Key, with outages (503), a rate limit (429),
//	                                  dropped answers and slow answers; GET /charges lists them
//
// Every subcommand takes -queue NAME (default "ledger"), -fifo and -store
// (dynamodb, the default, or postgres); every resource name derives from
// them. Endpoints, region and credentials come from the standard AWS SDK
// variables and config. With -store postgres the balances, journal, dedupe
// rows, outbox and Idempotency-Key records live in PostgreSQL
// (DATABASE_URL), in a schema named after the ledger that `setup` creates
// with sqsonce's migrations; the queues stay in SQS.
//
// The bank is the external effect a real worker has (a payment API): it
// keeps its charges in memory and prints "listening on http://HOST:PORT" as
// its first line. Outages and the rate limit refuse POST /charges and
// GET /charges/REF, never GET /charges and GET /stats, which tests use to
// check that every credit was charged exactly once; bank.go describes the
// API. It ignores -queue, -fifo and -store.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: ledger [-queue NAME] [-fifo] [-store dynamodb|postgres] COMMAND [flags]

commands:
  setup      create the queue NAME, its DLQ NAME-dlq and the ledger's tables, the limits' included (postgres: its schema, migrated)
  send       send credits: -n N [-accounts K] [-dup-rate R] [-bad-rate R] [-json]
  work       consume until SIGTERM/SIGINT: [-concurrency C] [-visibility D] [-handler-delay D] [-tx-delay D] [-log-level L]
             [-bank URL] (charge each credit at the bank first, as a recorded step: POST URL/charges with
             Idempotency-Key = the credit id; 429/503 pause the worker, other 4xx dead-letter the credit)
             [-bank-policy reconcile|rerun|park] (a charge whose answer was
             lost is reconciled with GET URL/charges/ID, the default; charged again; or parked in the DLQ
             with class outcome_unknown) [-lease D] (the credit's claim, taken over after a crash; 1m)
             [-back-pressure=false] (429/503 as ordinary transient failures: no pause, no breaker)
             [-rate N] (start at most N credits per second, every worker of the ledger together)
             [-account-concurrency K] (at most K credits of one account at once, every worker together)
             [-adaptive] (with -rate: lower the rate on the bank's 429s, bring it back after: AIMD);
             the limits are kept in the -store (DynamoDB table NAME-limits, or the postgres schema)
  unknown    credits whose bank charge has an unknown outcome (parked, or not yet reconciled) [-json];
             -resolve CREDIT=applied|not-applied records a person's decision (repeatable), after which a
             redrive of the DLQ completes the credit: applied ones are not charged again
  balances   print each account's balance and the total [-json]
  status     print the queue's and the DLQ's message counts [-json]
  audit      check the journal: how many credits were applied, and whether any twice [-json]
  serve      the HTTP API until SIGTERM: POST /credits (Authorization: Bearer T, Idempotency-Key K,
             {"account":"A","amount":N}) [-addr HOST:PORT] [-handler-delay D] [-lease D] [-log-level L];
             keys are per caller: a token CALLER.SECRET names its caller CALLER (a refreshed secret
             keeps the caller's keys), a token without a dot is its own caller
  relay      publish accepted credits from the outbox to the queue until SIGTERM [-log-level L]
  post       a client of serve: POST credits with retries of the same keys and report the answers:
             -servers URL[,URL] [-n N] [-accounts K] [-concurrency C] [-sequential] [-json]
  outbox     what waits in the outbox: pending, oldest, dead [-requeue] [-discard ID] [-json];
             -discard drops the parked (dead) event ID unsent, so its account's later credits go out
  bank       a toy bank until SIGTERM, in memory: POST /charges (Idempotency-Key K,
             {"ref":"R","account":"A","amount":N}) answers 201 charged or 200 already charged;
             GET /charges/R the charge or 404; GET /charges every charge as JSON lines; GET /stats counts.
             [-addr HOST:PORT] [-idempotent=true|false] (false: charge again on every POST)
             [-outage-every D -outage-for D] (503 with Retry-After in those windows from the start)
             [-rate N] (429 with Retry-After above N requests/s) [-drop-rate R] (charge, then close
             the connection unanswered) [-delay D] (wait before charging); 503 and 429 never answer
             GET /charges or GET /stats
`

// run is the whole program; exit codes: 0 ok, 1 failure, 2 usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := newGlobal()
	fs := g.flagSet("ledger", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	var err error
	switch cmd {
	case "setup":
		err = cmdSetup(ctx, g, rest, stdout, stderr)
	case "send":
		err = cmdSend(ctx, g, rest, stdout, stderr)
	case "work":
		err = cmdWork(ctx, g, rest, stdout, stderr)
	case "balances":
		err = cmdBalances(ctx, g, rest, stdout, stderr)
	case "status":
		err = cmdStatus(ctx, g, rest, stdout, stderr)
	case "audit":
		err = cmdAudit(ctx, g, rest, stdout, stderr)
	case "serve":
		err = cmdServe(ctx, g, rest, stdout, stderr)
	case "relay":
		err = cmdRelay(ctx, g, rest, stdout, stderr)
	case "post":
		err = cmdPost(ctx, g, rest, stdout, stderr)
	case "outbox":
		err = cmdOutbox(ctx, g, rest, stdout, stderr)
	case "unknown":
		err = cmdUnknown(ctx, g, rest, stdout, stderr)
	case "bank":
		err = cmdBank(ctx, g, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ledger: unknown command %q\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// SIGTERM while the command was still starting (checking its
		// tables, resolving its queue): a clean stop, nothing was begun.
		return 0
	case isUsage(err):
		fmt.Fprintln(stderr, "ledger:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "ledger:", err)
		return 1
	}
}
