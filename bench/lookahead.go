package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/pgstore"
)

// lookaheadDupPercent is the share of the duplicate stream's messages
// that repeat a key completed before the run.
const lookaheadDupPercent = 30

// lookaheadNote says how the look-ahead rows run.
const lookaheadNote = "the handler called directly (no SQS: the rows isolate the store) from %d goroutines, %d messages per run; " +
	"value: TxOptions.SkipCompleted on (one read before the transaction); limit: the same handler without it"

// lookaheadDDB counts the GetItem and TransactWriteItems calls of the
// DynamoDB look-ahead rows.
type lookaheadDDB struct {
	*dynamodb.Client
	gets, txs atomic.Int64
}

func (c *lookaheadDDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.Client.GetItem(ctx, in, o...)
}

func (c *lookaheadDDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.txs.Add(1)
	return c.Client.TransactWriteItems(ctx, in, o...)
}

var _ dedupedynamo.DynamoDBAPI = (*lookaheadDDB)(nil)

// lookaheadFigures are one round's measurements of one store: msgs/s of
// each stream with the look-ahead on and off, and the function's runs
// per duplicate in the duplicate stream.
type lookaheadFigures struct {
	uniqueOn, uniqueOff, dupOn, dupOff float64
	runsOn, runsOff                    float64
	// DynamoDB calls per message of the duplicate stream (0 on
	// PostgreSQL): GetItem and TransactWriteItems, look-ahead on and off.
	getsOn, txsOn, getsOff, txsOff float64
}

func (f lookaheadFigures) values() []float64 {
	return []float64{f.uniqueOn, f.uniqueOff, f.dupOn, f.dupOff, f.runsOn, f.runsOff, f.getsOn, f.txsOn, f.getsOff, f.txsOff}
}

// lookaheadStream is one timed run: n messages through h from
// concurrency goroutines, where message i is a duplicate of completed
// key dupKey(j) when i%10 < lookaheadDupPercent/10 and dups is set, and
// a new key otherwise. prefill completes the keys it will repeat before
// the clock starts, and calls reset. runs counts the function's runs; the
// result is msgs/s and the function's runs per duplicate.
func lookaheadStream(ctx context.Context, h consumer.Handler, runs *atomic.Int64, reset func(), prefix string, n, concurrency int, dups bool) (rate, perDup float64, err error) {
	isDup := func(i int) bool { return dups && i%10 < lookaheadDupPercent/10 }
	m := func(key string) *consumer.Message {
		return consumertest.NewMessage(key, consumertest.WithAttribute("sqsonce-id", key))
	}
	dupKey := func(i int) string { return fmt.Sprintf("%s-done-%d", prefix, i) }
	var repeated []int
	for i := range n {
		if isDup(i) {
			repeated = append(repeated, i)
		}
	}
	if _, err := workers(len(repeated), concurrency, func(j int) error {
		return h.Handle(ctx, m(dupKey(repeated[j-1])))
	}); err != nil {
		return 0, 0, fmt.Errorf("prefill: %w", err)
	}
	runs.Store(0)
	reset()
	rate, err = workers(n, concurrency, func(i int) error {
		i--
		if isDup(i) {
			if err := h.Handle(ctx, m(dupKey(i))); !errors.Is(err, consumer.ErrDuplicate) {
				return fmt.Errorf("duplicate %s: %v, want a duplicate", dupKey(i), err)
			}
			return nil
		}
		return h.Handle(ctx, m(fmt.Sprintf("%s-new-%d", prefix, i)))
	})
	if err != nil || len(repeated) == 0 {
		return rate, 0, err
	}
	fresh := n - len(repeated)
	return rate, float64(runs.Load()-int64(fresh)) / float64(len(repeated)), nil
}

// lookaheadRound runs the four streams of one round in turn: no
// duplicates and 30% duplicates, each with the look-ahead on and off.
// handler makes a fresh handler (its own namespace) with the look-ahead
// on or off, counting its function's runs in runs.
func (b *bench) lookaheadRound(round, n, concurrency int, handler func(name string, skip bool, runs *atomic.Int64, calls *lookaheadDDB) (consumer.Handler, error)) (lookaheadFigures, error) {
	var f lookaheadFigures
	step := func(rate, perDup, gets, txs *float64, name string, skip, dups bool) func() error {
		return func() error {
			var runs atomic.Int64
			calls := &lookaheadDDB{Client: b.ddb}
			name = fmt.Sprintf("%s-r%d", name, round)
			h, err := handler(name, skip, &runs, calls)
			if err != nil {
				return err
			}
			var pd float64
			*rate, pd, err = lookaheadStream(b.ctx, h, &runs, func() { calls.gets.Store(0); calls.txs.Store(0) }, name, n, concurrency, dups)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if perDup != nil {
				*perDup = pd
				*gets, *txs = float64(calls.gets.Load())/float64(n), float64(calls.txs.Load())/float64(n)
			}
			return nil
		}
	}
	err := inTurn(round,
		step(&f.uniqueOff, nil, nil, nil, "unique-off", false, false),
		step(&f.uniqueOn, nil, nil, nil, "unique-on", true, false),
		step(&f.dupOff, &f.runsOff, &f.getsOff, &f.txsOff, "dup-off", false, true),
		step(&f.dupOn, &f.runsOn, &f.getsOn, &f.txsOn, "dup-on", true, true))
	return f, err
}

// lookaheadRows: transactional mode with TxOptions.SkipCompleted on
// against the same mode without it, on DynamoDB and on PostgreSQL (when
// DATABASE_URL is set): on a stream of new keys (the read's cost) and on
// one where 30% of the messages repeat a completed key (the saving).
func (b *bench) lookaheadRows() ([]row, error) {
	ctx := b.ctx
	n := max(b.n/4, 10)
	table, err := b.table(ctx, "lookahead")
	if err != nil {
		return nil, err
	}
	effects, err := b.table(ctx, "lookahead-effects")
	if err != nil {
		return nil, err
	}
	ddbHandler := func(name string, skip bool, runs *atomic.Int64, calls *lookaheadDDB) (consumer.Handler, error) {
		s, err := dedupedynamo.New(dedupedynamo.Config{Client: calls, Table: table, Namespace: name})
		if err != nil {
			return nil, err
		}
		var counter atomic.Int64
		return dedupedynamo.Transactional(s, func(context.Context, *consumer.Message) ([]types.TransactWriteItem, error) {
			runs.Add(1)
			return []types.TransactWriteItem{{Update: counterUpdate(effects, "counter-", counter.Add(1))}}, nil
		}, &dedupedynamo.TxOptions{SkipCompleted: skip}), nil
	}
	var s [10]sample
	if err := b.interleave("lookahead, DynamoDB", func(round int) ([]float64, error) {
		f, err := b.lookaheadRound(round, n, dedupeConcurrency, ddbHandler)
		return f.values(), err
	}, &s[0], &s[1], &s[2], &s[3], &s[4], &s[5], &s[6], &s[7], &s[8], &s[9]); err != nil {
		return nil, err
	}
	how := fmt.Sprintf(lookaheadNote, dedupeConcurrency, n)
	const g = "Dedupe, DynamoDB"
	rows := []row{
		{group: g, name: "transactional mode, SkipCompleted vs without, no duplicates", value: s[0], limit: s[1], ratio: ratios(s[0], s[1]), unit: "msgs/s",
			note: b.interleaved() + "; " + how + "; every key new: the ratio is the cost of the strongly consistent GetItem each message pays before its TransactWriteItems (the function: one counter update)"},
		{group: g, name: fmt.Sprintf("transactional mode, SkipCompleted vs without, %d%% duplicates", lookaheadDupPercent), value: s[2], limit: s[3], ratio: ratios(s[2], s[3]), unit: "msgs/s",
			note: b.interleaved() + "; " + how + fmt.Sprintf("; %d%% of the messages repeat a key completed before the run (the same body): with the look-ahead each costs one GetItem, without it a run of the function and a TransactWriteItems the dedupe record cancels. The function here only returns its write: one that calls a service saves that call too, which no rate here shows (see the runs row)", lookaheadDupPercent)},
		{group: g, name: "function runs per duplicate, SkipCompleted vs without", value: s[4], limit: s[5], unit: "runs",
			note: fmt.Sprintf("the duplicate stream's runs of the function beyond one per new key, per duplicate of a completed key; %s", b.interleaved())},
		// Without SkipCompleted no GetItem is made: a limit of 0 has no
		// ratio, so the row gives it in its note.
		{group: g, name: fmt.Sprintf("GetItem per message, %d%% duplicates, with SkipCompleted", lookaheadDupPercent), value: s[6], unit: "req/msg",
			note: fmt.Sprintf("%.2f without it; strongly consistent, one read unit each for the dedupe record (under 1 KB); on the stream of new keys also one per message", s[8].med())},
		{group: g, name: fmt.Sprintf("TransactWriteItems per message, %d%% duplicates, SkipCompleted vs without", lookaheadDupPercent), value: s[7], limit: s[9], unit: "req/msg",
			note: "each, here, two items (the update and the dedupe record), two write units per item on DynamoDB; a duplicate's is cancelled by the record's condition"},
	}

	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprintf(b.errw, "bench:   %s\n", pgSkipped)
		b.skipped = append(b.skipped, "PostgreSQL look-ahead rows skipped: DATABASE_URL is not set (the local stack's env sets it)")
		return rows, nil
	}
	pool, cleanup, err := postgresPool(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE journal (message_id text PRIMARY KEY, amount bigint NOT NULL);
		INSERT INTO accounts SELECT 'a' || i, 0 FROM generate_series(0, 99) i`); err != nil {
		return nil, err
	}
	pgHandler := func(name string, skip bool, runs *atomic.Int64, _ *lookaheadDDB) (consumer.Handler, error) {
		s, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: name})
		if err != nil {
			return nil, err
		}
		return dedupepg.Transactional(s, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
			runs.Add(1)
			return credit(ctx, tx, name+"#"+msg.Key())
		}, &dedupepg.TxOptions{SkipCompleted: skip}), nil
	}
	// PostgreSQL runs several times faster: twice the messages, as the
	// other PostgreSQL dedupe row.
	pn := max(b.n/2, 10)
	var p [10]sample
	if err := b.interleave("lookahead, PostgreSQL", func(round int) ([]float64, error) {
		f, err := b.lookaheadRound(round, pn, pgConcurrency, pgHandler)
		return f.values(), err
	}, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &p[8], &p[9]); err != nil {
		return nil, err
	}
	how = fmt.Sprintf(lookaheadNote, pgConcurrency, pn)
	const pg = "Dedupe, PostgreSQL"
	return append(rows,
		row{group: pg, name: "dedupepg Transactional, SkipCompleted vs without, no duplicates", value: p[0], limit: p[1], ratio: ratios(p[0], p[1]), unit: "msgs/s",
			note: b.interleaved() + "; " + how + "; every key new: the ratio is the cost of the SELECT each message pays before its transaction (BEGIN, the dedupe row, INSERT journal, UPDATE accounts, COMMIT)"},
		row{group: pg, name: fmt.Sprintf("dedupepg Transactional, SkipCompleted vs without, %d%% duplicates", lookaheadDupPercent), value: p[2], limit: p[3], ratio: ratios(p[2], p[3]), unit: "msgs/s",
			note: b.interleaved() + "; " + how + fmt.Sprintf("; %d%% of the messages repeat a key completed before the run: with the look-ahead each costs one SELECT, without it a transaction rolled back at the dedupe row (BEGIN, the INSERT, a SELECT, ROLLBACK); the function runs for neither (%s and %s runs per duplicate)", lookaheadDupPercent, p[4], p[5])},
	), nil
}
