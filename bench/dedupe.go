package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/dynamolease"
)

// plainWorkNote says what the dedupe rows' plain loops do.
const plainWorkNote = "a plain SQS loop on a queue of the same messages (4 pollers, each: ReceiveMessage of 8, the writes for the 8 at once, DeleteMessageBatch; 32 writes at most in flight, as sqsonce's 32 handlers)"

// dedupeConcurrency is the consumer's Concurrency and the plain loops'
// worker count in the dedupe rows.
const dedupeConcurrency = 32

// countingDDB counts DynamoDB write requests, and how many
// TransactWriteItems calls are in flight as each one starts.
type countingDDB struct {
	*dynamodb.Client
	writes atomic.Int64
	// txInFlight is the calls in flight now; txSeen sums it over the
	// calls, each counting itself, as each starts.
	txInFlight, txSeen atomic.Int64
}

// reset zeroes the counts.
func (c *countingDDB) reset() {
	c.writes.Store(0)
	c.txSeen.Store(0)
}

// txConcurrency is the average number of transactions in flight that a
// transaction found as it started, itself included; 0 before any.
func (c *countingDDB) txConcurrency() float64 {
	if n := c.writes.Load(); n > 0 {
		return float64(c.txSeen.Load()) / float64(n)
	}
	return 0
}

func (c *countingDDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.writes.Add(1)
	return c.Client.PutItem(ctx, in, o...)
}

func (c *countingDDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.writes.Add(1)
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *countingDDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.writes.Add(1)
	return c.Client.DeleteItem(ctx, in, o...)
}

func (c *countingDDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.writes.Add(1)
	c.txSeen.Add(c.txInFlight.Add(1))
	defer c.txInFlight.Add(-1)
	return c.Client.TransactWriteItems(ctx, in, o...)
}

var _ dedupedynamo.DynamoDBAPI = (*countingDDB)(nil)

// table creates a dedupe-shaped table (pk S) for the run and deletes it
// at the end.
func (b *bench) table(ctx context.Context, name string) (string, error) {
	t := fmt.Sprintf("%s-%s", b.env.prefix, name)
	if err := dedupedynamo.CreateTable(ctx, b.ddb, t); err != nil {
		return "", err
	}
	b.env.tables = append(b.env.tables, t)
	return t, nil
}

func sAttr(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func nAttr(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// dedupeRows: sqsonce with the DynamoDB dedupe store, in lease mode and in
// transactional mode, against plain loops of writes at the same
// concurrency: the writes each mode makes (the PutItem + UpdateItem pair of
// lease mode; transactional mode's TransactWriteItems), which carry the
// targets, and smaller ones for scale (one conditional PutItem; a
// TransactWriteItems of a minimal conditional put and the update). A warm-up round, then b.runs rounds, each running the plain
// loops and the sqsonce modes interleaved.
func (b *bench) dedupeRows() ([]row, error) {
	ctx := b.ctx
	n := max(b.n/4, 10)
	table, err := b.table(ctx, "dedupe")
	if err != nil {
		return nil, err
	}
	effects, err := b.table(ctx, "effects")
	if err != nil {
		return nil, err
	}
	var put, pair, txLimit, ownTx, busyTx, lease, tx, leaseWrites, txWrites, txAtOnce, ownTxAtOnce sample
	if err := b.interleave("dedupe", func(round int) ([]float64, error) {
		f, err := b.dedupeRound(ctx, round, n, table, effects)
		return []float64{f.putLimit, f.pairLimit, f.txLimit, f.ownTxLimit, f.busyTxLimit, f.lease, f.tx, f.leaseWrites, f.txWrites, f.txAtOnce, f.ownTxAtOnce}, err
	}, &put, &pair, &txLimit, &ownTx, &busyTx, &lease, &tx, &leaseWrites, &txWrites, &txAtOnce, &ownTxAtOnce); err != nil {
		return nil, err
	}
	const g = "Dedupe, DynamoDB"
	return []row{
		{group: g, name: "dedupe, lease mode vs one conditional PutItem", value: lease, limit: put, ratio: ratios(lease, put), unit: "msgs/s",
			note: b.interleaved() + "; limit: " + plainWorkNote + " and one conditional PutItem per message; lease mode writes twice per message, so about half is the ceiling: no target here"},
		row{group: g, name: "dedupe, lease mode vs its own two writes", value: lease, limit: pair, ratio: ratios(lease, pair), unit: "msgs/s",
			note: b.interleaved() + "; limit: " + plainWorkNote + " and lease mode's own PutItem + UpdateItem per message (claim + complete, the same items and conditions)"}.with(atLeast(0.9)),
		{group: g, name: "dedupe, transactional mode vs a minimal TransactWriteItems", value: tx, limit: txLimit, ratio: ratios(tx, txLimit), unit: "msgs/s",
			note: b.interleaved() + "; limit: " + plainWorkNote + " and one TransactWriteItems per message: a put on attribute_not_exists(pk) OR expires_at < :now, and the update; transactional mode's put carries a token and a fingerprint and the three-clause claim condition (a lease-mode record whose lease ended can be taken over), which DynamoDB Local takes longer to evaluate: no target here"},
		row{group: g, name: "dedupe, transactional mode vs its own transaction", value: tx, limit: ownTx, ratio: ratios(tx, ownTx), unit: "msgs/s",
			note: b.interleaved() + "; limit: " + plainWorkNote + " and transactional mode's own TransactWriteItems per message (the update, then the COMPLETED record on the claim condition)"}.with(atLeast(0.9)),
		{group: g, name: "dedupe, transactional mode vs its own transaction, 32 at once, no SQS", value: tx, limit: busyTx, ratio: ratios(tx, busyTx), unit: "msgs/s",
			note: b.interleaved() + fmt.Sprintf("; limit: the same transaction from %d goroutines, each starting its next as soon as one returns, with no SQS calls at all: the load a consumer that keeps its %d handlers busy gives DynamoDB Local, which commits about one transaction at a time (its rate stays level from 8 to 32 in flight while each call's latency grows); no target here", dedupeConcurrency, dedupeConcurrency)},
		{group: g, name: "transactions in flight as each starts, transactional mode", value: txAtOnce, limit: ownTxAtOnce, unit: "calls",
			note: "median of the runs' averages, each call counting itself; limit: the plain loop of its own transaction, whose 4 pollers start 8 at once and wait for all 8 and a delete before the next 8"},
		{group: g, name: "DynamoDB writes per message, lease mode", value: leaseWrites, unit: "req/msg", note: "claim PutItem + complete UpdateItem"},
		{group: g, name: "DynamoDB writes per message, transactional", value: txWrites, unit: "req/msg", note: "one TransactWriteItems"},
	}, nil
}

// dedupeFigures are one round's measurements.
type dedupeFigures struct {
	putLimit, pairLimit, txLimit float64 // plain loops, ops/s
	ownTxLimit                   float64 // plain loop of transactional mode's own transaction
	busyTxLimit                  float64 // the same transaction from dedupeConcurrency goroutines, no SQS
	txAtOnce, ownTxAtOnce        float64 // transactions in flight as each starts: sqsonce, plain loop
	lease, tx                    float64 // sqsonce, msgs/s
	leaseWrites, txWrites        float64 // DynamoDB write requests per message
}

// dedupeRound measures the plain loops and both sqsonce modes once, in
// the order plain PutItem, plain pair, lease mode, minimal plain
// transaction, own plain transaction, transactional mode, own transaction
// without SQS, or the reverse (inTurn).
func (b *bench) dedupeRound(ctx context.Context, round, n int, table, effects string) (dedupeFigures, error) {
	var f dedupeFigures
	now := time.Now()
	// The record code both modes call, for the plain loops of their own
	// writes (the same items, conditions and return values).
	own := &dynamolease.Table{Client: b.ddb, Name: table, TTL: dedupe.DefaultTTL, Now: time.Now, LenientFingerprint: true, ErrNotOwner: dedupe.ErrNotOwner, Prefix: "bench"}
	leaseDDB, txDDB, ownDDB := &countingDDB{Client: b.ddb}, &countingDDB{Client: b.ddb}, &countingDDB{Client: b.ddb}
	ownTx := func(pk string, i int) error {
		_, err := ownDDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: counterUpdate(effects, "plain-own-counter-", int64(i))},
			{Put: own.CompletedPut(pk, benchFingerprint, time.Now())},
		}})
		return err
	}
	err := inTurn(round, b.plainStep(ctx, &f.putLimit, "plain-put", "plain PutItem loop", n, func(i int) error {
		_, err := b.ddb.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk": sAttr(fmt.Sprintf("plain#%d#%d", round, i)), "status": sAttr("IN_PROGRESS"), "token": sAttr("t"),
				"lease_until": nAttr(now.Add(time.Minute).UnixMilli()), "expires_at": nAttr(now.Add(time.Hour).Unix()),
			},
			ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires_at < :now"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": nAttr(now.Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}),
		// Lease mode's claim and complete as a plain loop: what the
		// middleware costs on top of the writes it needs.
		b.plainStep(ctx, &f.pairLimit, "plain-pair", "plain claim+complete loop", n, func(i int) error {
			pk := fmt.Sprintf("pair#%d#%d", round, i)
			r, err := own.Claim(ctx, pk, benchFingerprint, time.Minute)
			if err != nil {
				return err
			}
			if r.Outcome != dynamolease.Claimed {
				return fmt.Errorf("claim %s: outcome %d", pk, r.Outcome)
			}
			return own.Complete(ctx, r.Token, own.CompleteUpdate(pk, r.Token, "", nil, nil))
		}), func() error {
			// Lease mode: claim, no-op handler, complete.
			leaseStore, err := dedupedynamo.New(dedupedynamo.Config{Client: leaseDDB, Table: table, Namespace: "lease"})
			if err != nil {
				return err
			}
			dd, err := dedupe.New(dedupe.Config{Store: leaseStore})
			if err != nil {
				return err
			}
			lease, err := b.consumeUnique(ctx, "lease", n, leaseDDB, runOpts{concurrency: dedupeConcurrency,
				middleware: []consumer.Middleware{dd.Wrap}})
			f.lease = lease.rate
			return err
		}, b.plainStep(ctx, &f.txLimit, "plain-tx", "plain TransactWriteItems loop", n, func(i int) error {
			_, err := b.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{
					TableName: aws.String(table),
					Item: map[string]types.AttributeValue{
						"pk": sAttr(fmt.Sprintf("plaintx#%d#%d", round, i)), "status": sAttr("COMPLETED"), "expires_at": nAttr(now.Add(time.Hour).Unix()),
					},
					ConditionExpression:       aws.String("attribute_not_exists(pk) OR expires_at < :now"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":now": nAttr(now.Unix())},
				}},
				{Update: counterUpdate(effects, "plain-counter-", int64(i))},
			}})
			return err
		}),
		// Transactional mode's own transaction as a plain loop: the
		// effect, then the COMPLETED record on the claim condition.
		func() error {
			ownDDB.reset()
			return b.plainStep(ctx, &f.ownTxLimit, "plain-own-tx", "plain own-transaction loop", n, func(i int) error {
				return ownTx(fmt.Sprintf("owntx#%d#%d", round, i), i)
			})()
		}, func() error {
			// Transactional mode: the effect and the dedupe record in one
			// TransactWriteItems.
			txStore, err := dedupedynamo.New(dedupedynamo.Config{Client: txDDB, Table: table, Namespace: "tx"})
			if err != nil {
				return err
			}
			var counter atomic.Int64
			tx, err := b.consumeUnique(ctx, "tx", n, txDDB, runOpts{concurrency: dedupeConcurrency,
				handler: dedupedynamo.Transactional(txStore, func(context.Context, *consumer.Message) ([]types.TransactWriteItem, error) {
					return []types.TransactWriteItem{{Update: counterUpdate(effects, "counter-", counter.Add(1))}}, nil
				}, nil)})
			f.tx = tx.rate
			return err
		},
		// The same transaction as the plain loop's, kept 32 in flight
		// without SQS: DynamoDB Local's rate under a consumer's steady
		// load.
		measured(&f.busyTxLimit, "own transaction without SQS", func() (float64, error) {
			return workers(n, dedupeConcurrency, func(i int) error { return ownTx(fmt.Sprintf("busytx#%d#%d", round, i), i) })
		}))
	if err != nil {
		return f, err
	}
	f.txAtOnce, f.ownTxAtOnce = txDDB.txConcurrency(), ownDDB.txConcurrency()
	f.leaseWrites = float64(leaseDDB.writes.Load()) / float64(n)
	f.txWrites = float64(txDDB.writes.Load()) / float64(n)
	return f, nil
}

// benchFingerprint stands for a body's fingerprint in the plain loops: the
// length of dedupe.Fingerprint's.
var benchFingerprint = strings.Repeat("f", 64)

// counterUpdate is the effect the transactional rows commit: one of 50
// counters, so that transactions touch shared items as real ones do.
func counterUpdate(table, prefix string, i int64) *types.Update {
	return &types.Update{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": sAttr(prefix + strconv.FormatInt(i%50, 10))},
		UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": nAttr(1)},
	}
}

// plainWork is a plain consumer loop doing work for each of n messages on
// a fresh queue: dedupeConcurrency/8 pollers each receive 8 messages, run
// work for them at once, and delete them (plainWorkLoop), so that the
// plain side pays for SQS as sqsonce does and both run 32 writes at once.
func (b *bench) plainWork(ctx context.Context, name string, n int, work func(i int) error) (rate float64, err error) {
	err = b.onUnique(ctx, name, n, func(q string) (err error) {
		rate, _, err = plainWorkLoop(ctx, b.client, q, n, dedupeConcurrency/8, 8, false, work)
		return err
	})
	return rate, err
}

// plainStep is a round's step that runs plainWork into rate, its error
// naming the loop.
func (b *bench) plainStep(ctx context.Context, rate *float64, name, loop string, n int, work func(i int) error) func() error {
	return measured(rate, loop, func() (float64, error) { return b.plainWork(ctx, name, n, work) })
}

// consumeUnique runs the consumer over n messages with distinct ids on a
// fresh queue; counter, when not nil, is zeroed before each try.
func (b *bench) consumeUnique(ctx context.Context, name string, n int, counter *countingDDB, o runOpts) (res runResult, err error) {
	err = b.onUnique(ctx, name, n, func(q string) (err error) {
		if counter != nil {
			counter.reset() // a try the emulator spoilt wrote too
		}
		res, err = runConsumer(ctx, b.client, q, n, o)
		return err
	})
	return res, err
}

// onUnique runs run on a fresh queue holding n messages with distinct ids,
// again on another fresh queue when a receive response was lost (see
// clean).
func (b *bench) onUnique(ctx context.Context, name string, n int, run func(queueURL string) error) error {
	return b.clean(name, func() error {
		q, err := b.env.queue(ctx, name, false)
		if err != nil {
			return err
		}
		defer b.env.drop(ctx, q)
		if err := preloadUnique(ctx, b, q, n); err != nil {
			return err
		}
		return run(q)
	})
}

// preloadUnique sends n messages with distinct bodies (so the dedupe
// fingerprints differ) and distinct sqsonce-ids.
func preloadUnique(ctx context.Context, b *bench, queueURL string, n int) error {
	return preloadWith(ctx, b.client, queueURL, n, func(i int) string { return fmt.Sprintf(`{"q":%q,"i":%d}`, queueURL, i) })
}
