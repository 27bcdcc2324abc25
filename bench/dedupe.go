package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dynamo"
)

// plainWorkNote says what the dedupe rows' plain loops do.
const plainWorkNote = "a plain SQS loop on a queue of the same messages (4 pollers, each: ReceiveMessage of 8, the writes for the 8 at once, DeleteMessageBatch; 32 writes at most in flight, as sqsonce's 32 handlers)"

// dedupeConcurrency is the consumer's Concurrency and the plain loops'
// worker count in the dedupe rows.
const dedupeConcurrency = 32

// countingDDB counts DynamoDB write requests.
type countingDDB struct {
	*dynamodb.Client
	writes atomic.Int64
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
	return c.Client.TransactWriteItems(ctx, in, o...)
}

var _ dynamo.DynamoDBAPI = (*countingDDB)(nil)

// table creates a dedupe-shaped table (pk S) for the run and deletes it
// at the end.
func (b *bench) table(ctx context.Context, name string) (string, error) {
	t := fmt.Sprintf("%s-%s", b.env.prefix, name)
	if err := dynamo.CreateTable(ctx, b.ddb, t); err != nil {
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
// transactional mode, against the plain loop of the same writes (a
// conditional PutItem; the PutItem + UpdateItem pair lease mode makes; a
// TransactWriteItems of a conditional put and an update) at the same
// concurrency. A warm-up round, then b.runs rounds, each running the plain
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
	var put, pair, txLimit, lease, tx, leaseWrites, txWrites sample
	if err := b.interleave("dedupe", func(round int) ([]float64, error) {
		f, err := b.dedupeRound(ctx, round, n, table, effects)
		return []float64{f.putLimit, f.pairLimit, f.txLimit, f.lease, f.tx, f.leaseWrites, f.txWrites}, err
	}, &put, &pair, &txLimit, &lease, &tx, &leaseWrites, &txWrites); err != nil {
		return nil, err
	}
	const g = "Dedupe, DynamoDB"
	return []row{
		{group: g, name: "dedupe, lease mode vs one conditional PutItem", value: lease, limit: put, ratio: ratios(lease, put), unit: "msgs/s",
			note: b.interleaved() + "; limit: " + plainWorkNote + " and one conditional PutItem per message; lease mode writes twice per message, so about half is the ceiling: no target here"},
		row{group: g, name: "dedupe, lease mode vs its own two writes", value: lease, limit: pair, ratio: ratios(lease, pair), unit: "msgs/s",
			note: b.interleaved() + "; limit: " + plainWorkNote + " and PutItem + UpdateItem per message (claim + complete)"}.with(atLeast(0.9)),
		row{group: g, name: "dedupe, transactional mode (conc 32)", value: tx, limit: txLimit, ratio: ratios(tx, txLimit), unit: "msgs/s",
			note: b.interleaved() + "; limit: " + plainWorkNote + " and one TransactWriteItems (put + update) per message"}.with(atLeast(0.9)),
		{group: g, name: "DynamoDB writes per message, lease mode", value: leaseWrites, unit: "req/msg", note: "claim PutItem + complete UpdateItem"},
		{group: g, name: "DynamoDB writes per message, transactional", value: txWrites, unit: "req/msg", note: "one TransactWriteItems"},
	}, nil
}

// dedupeFigures are one round's measurements.
type dedupeFigures struct {
	putLimit, pairLimit, txLimit float64 // plain loops, ops/s
	lease, tx                    float64 // sqsonce, msgs/s
	leaseWrites, txWrites        float64 // DynamoDB write requests per message
}

// dedupeRound measures the plain loops and both sqsonce modes once, in
// the order plain, plain, lease mode, plain, transactional mode.
func (b *bench) dedupeRound(ctx context.Context, round, n int, table, effects string) (dedupeFigures, error) {
	var f dedupeFigures
	var err error
	now := time.Now()
	f.putLimit, err = b.plainWork(ctx, "plain-put", n, func(i int) error {
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
	})
	if err != nil {
		return f, fmt.Errorf("plain PutItem loop: %w", err)
	}
	// Lease mode's own two writes per message, as a plain loop: what the
	// middleware costs on top of the writes lease mode requires.
	f.pairLimit, err = b.plainWork(ctx, "plain-pair", n, func(i int) error {
		pk := fmt.Sprintf("pair#%d#%d", round, i)
		if _, err := b.ddb.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk": sAttr(pk), "status": sAttr("IN_PROGRESS"), "token": sAttr("t"),
				"lease_until": nAttr(now.Add(time.Minute).UnixMilli()), "expires_at": nAttr(now.Add(time.Hour).Unix()),
			},
			ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires_at < :now"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": nAttr(now.Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}); err != nil {
			return err
		}
		_, err := b.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": sAttr(pk)},
			UpdateExpression:          aws.String("SET #st = :c REMOVE lease_until"),
			ConditionExpression:       aws.String("#tk = :t AND #st = :ip"),
			ExpressionAttributeNames:  map[string]string{"#st": "status", "#tk": "token"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":c": sAttr("COMPLETED"), ":t": sAttr("t"), ":ip": sAttr("IN_PROGRESS")},
		})
		return err
	})
	if err != nil {
		return f, fmt.Errorf("plain claim+complete loop: %w", err)
	}
	// Lease mode: claim, no-op handler, complete.
	leaseDDB := &countingDDB{Client: b.ddb}
	leaseStore, err := dynamo.New(dynamo.Config{Client: leaseDDB, Table: table, Namespace: "lease"})
	if err != nil {
		return f, err
	}
	lease, err := b.consumeUnique(ctx, "lease", n, &leaseDDB.writes, runOpts{concurrency: dedupeConcurrency,
		middleware: []consumer.Middleware{dedupe.Middleware(leaseStore, dedupe.Options{})}})
	if err != nil {
		return f, err
	}

	f.txLimit, err = b.plainWork(ctx, "plain-tx", n, func(i int) error {
		_, err := b.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName: aws.String(table),
				Item: map[string]types.AttributeValue{
					"pk": sAttr(fmt.Sprintf("plaintx#%d#%d", round, i)), "status": sAttr("COMPLETED"), "expires_at": nAttr(now.Add(time.Hour).Unix()),
				},
				ConditionExpression:       aws.String("attribute_not_exists(pk) OR expires_at < :now"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":now": nAttr(now.Unix())},
			}},
			{Update: &types.Update{
				TableName: aws.String(effects), Key: map[string]types.AttributeValue{"pk": sAttr("plain-counter-" + strconv.Itoa(i%50))},
				UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": nAttr(1)},
			}},
		}})
		return err
	})
	if err != nil {
		return f, fmt.Errorf("plain TransactWriteItems loop: %w", err)
	}

	// Transactional mode: the effect and the dedupe record in one
	// TransactWriteItems.
	txDDB := &countingDDB{Client: b.ddb}
	txStore, err := dynamo.New(dynamo.Config{Client: txDDB, Table: table, Namespace: "tx"})
	if err != nil {
		return f, err
	}
	var counter atomic.Int64
	tx, err := b.consumeUnique(ctx, "tx", n, &txDDB.writes, runOpts{concurrency: dedupeConcurrency,
		handler: dynamo.Transactional(txStore, func(context.Context, *consumer.Message) ([]types.TransactWriteItem, error) {
			i := counter.Add(1)
			return []types.TransactWriteItem{{Update: &types.Update{
				TableName: aws.String(effects), Key: map[string]types.AttributeValue{"pk": sAttr("counter-" + strconv.FormatInt(i%50, 10))},
				UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": nAttr(1)},
			}}}, nil
		}, nil)})
	if err != nil {
		return f, err
	}
	f.lease, f.tx = lease.rate, tx.rate
	f.leaseWrites = float64(leaseDDB.writes.Load()) / float64(n)
	f.txWrites = float64(txDDB.writes.Load()) / float64(n)
	return f, nil
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

// consumeUnique runs the consumer over n messages with distinct ids on a
// fresh queue; counter, when not nil, is zeroed before each try.
func (b *bench) consumeUnique(ctx context.Context, name string, n int, counter *atomic.Int64, o runOpts) (res runResult, err error) {
	err = b.onUnique(ctx, name, n, func(q string) (err error) {
		if counter != nil {
			counter.Store(0) // a try the emulator spoilt wrote too
		}
		res, err = runConsumer(ctx, b.client, q, n, o)
		return err
	})
	return res, err
}

// onUnique runs run on a fresh queue holding n messages with distinct ids,
// again on another fresh queue when the emulator lost a receive (see
// clean).
func (b *bench) onUnique(ctx context.Context, name string, n int, run func(queueURL string) error) error {
	return b.clean(name, func() error {
		q, err := b.env.queue(ctx, name, false)
		if err != nil {
			return err
		}
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
