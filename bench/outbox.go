package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/producer"
)

// Outbox runs: events spread over outboxEntities entities (one relay batch
// takes each entity's oldest event, so as many entities as the relay's
// default batch of 100), sent by the plain loop with the producer's
// default of 4 SendMessageBatch calls at once.
const (
	outboxEntities    = 100
	outboxSenders     = 4
	outboxEventType   = "credited"
	outboxPerCommitTx = 10 // events per preload transaction
)

// outboxFewEntities is the entity count of the few-entities rows: long
// per-entity runs (2,500 events at the default -n are 625 of each).
const outboxFewEntities = 4

// outboxEvents are the n events of one run, of entities "<prefix>-e<k>",
// k < entities, in turn.
func outboxEvents(prefix string, n, entities int) []outbox.Event {
	evs := make([]outbox.Event, n)
	for i := range evs {
		evs[i] = outbox.Event{
			ID:      fmt.Sprintf("%s-%d", prefix, i),
			Entity:  fmt.Sprintf("%s-e%d", prefix, i%entities),
			Type:    outboxEventType,
			Payload: fmt.Sprintf(`{"id":"%s-%d","account":"a%d","amount":1}`, prefix, i, i%entities),
		}
	}
	return evs
}

// orderedSend is the limit of a relay that keeps each entity's events in
// commit order on few entities: an entity's event may go out only once
// its previous one was accepted (entries of one SendMessageBatch call are
// settled each on its own, so two events of an entity in one call, or in
// two calls at once, could be stored out of order). So the loop sends
// waves, each entity's next event in every wave, one wave after the other
// (a wave of up to 10 entities is one call; larger waves go plainSend's
// way, 10 a call, outboxSenders at once). It returns events/s.
func orderedSend(ctx context.Context, client *sqs.Client, queueURL string, evs []outbox.Event) (float64, error) {
	var order []string
	runs := map[string][]outbox.Event{}
	for _, ev := range evs {
		if _, ok := runs[ev.Entity]; !ok {
			order = append(order, ev.Entity)
		}
		runs[ev.Entity] = append(runs[ev.Entity], ev)
	}
	start := time.Now()
	for w := 0; ; w++ {
		var wave []outbox.Event
		for _, e := range order {
			if w < len(runs[e]) {
				wave = append(wave, runs[e][w])
			}
		}
		if len(wave) == 0 {
			break
		}
		if _, err := plainSend(ctx, client, queueURL, wave); err != nil {
			return 0, err
		}
	}
	return float64(len(evs)) / time.Since(start).Seconds(), nil
}

// plainSend is the limit of a relay: the same events sent to a fresh queue
// with SendMessageBatch, 10 a call, outboxSenders calls at once, each
// message with the attributes the relay sets (sqsonce-id and the event
// type). It returns events/s.
func plainSend(ctx context.Context, client *sqs.Client, queueURL string, evs []outbox.Event) (float64, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(outboxSenders)
	start := time.Now()
	for from := 0; from < len(evs); from += producer.MaxBatchEntries {
		batch := evs[from:min(from+producer.MaxBatchEntries, len(evs))]
		g.Go(func() error {
			entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
			for i, ev := range batch {
				entries[i] = sqstypes.SendMessageBatchRequestEntry{
					Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(ev.Payload),
					MessageAttributes: map[string]sqstypes.MessageAttributeValue{
						producer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(ev.ID)},
						outbox.AttrType: {DataType: aws.String("String"), StringValue: aws.String(ev.Type)},
					},
				}
			}
			out, err := client.SendMessageBatch(gctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
			if err != nil {
				return fmt.Errorf("plain send: %w", err)
			}
			if len(out.Failed) > 0 {
				return fmt.Errorf("plain send: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(len(evs)) / time.Since(start).Seconds(), nil
}

// publishedCounter is a relay Observer that closes done once n events
// were published and notes when.
type publishedCounter struct {
	outbox.NopObserver
	n    int
	done chan struct{}

	mu     sync.Mutex
	count  int
	failed int
	last   time.Time
}

func (p *publishedCounter) Published(evs []outbox.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count += len(evs)
	p.last = time.Now()
	if p.count >= p.n && p.done != nil {
		close(p.done)
		p.done = nil
	}
}

func (p *publishedCounter) SendFailed(outbox.Event, error, bool) {
	p.mu.Lock()
	p.failed++
	p.mu.Unlock()
}

// relayRun runs one relay with its defaults on store until n events are
// published to queueURL and returns events/s from its start to the last
// publish.
func relayRun(ctx context.Context, client *sqs.Client, store outbox.Store, queueURL string, n int) (float64, error) {
	done := make(chan struct{})
	obs := &publishedCounter{n: n, done: done}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: client, QueueURL: queueURL, Observer: obs})
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- relay.Run(runCtx) }()
	select {
	case <-done:
	case err := <-errc:
		return 0, fmt.Errorf("relay stopped early: %w", err)
	case <-time.After(10 * time.Minute):
		stop()
		<-errc
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return 0, fmt.Errorf("relay published %d of %d events (%d failed sends) within 10m", obs.count, n, obs.failed)
	}
	stop()
	if err := <-errc; err != nil {
		return 0, err
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.failed > 0 {
		return 0, fmt.Errorf("relay: %d failed sends", obs.failed)
	}
	return float64(n) / obs.last.Sub(start).Seconds(), nil
}

// textbookRelay is a plain relay loop over a plain outbox table.
type textbookRelay interface {
	preload(ctx context.Context, evs []outbox.Event) error
	relay(ctx context.Context, client *sqs.Client, queueURL string, n int) (float64, error)
}

// relayRows measures a relay against the plain send loop and the textbook
// relay loop, interleaved: a warm-up round, then b.runs rounds of (plain
// send, textbook relay, sqsonce relay; backwards every other round), each
// on a fresh queue, the outboxes filled (untimed) before their relay
// starts: the relay's by commit, which commits its events in one
// transaction of the store.
func (b *bench) relayRows(label string, n int, store outbox.Store, commit func(ctx context.Context, evs []outbox.Event) error, tb textbookRelay) (relay, plain, textbook sample, err error) {
	ctx := b.ctx
	err = b.interleave(label, func(round int) ([]float64, error) {
		evs := outboxEvents(fmt.Sprintf("%s%d", label, round), n, outboxEntities)
		var p, t, r float64
		err := inTurn(round, func() error {
			q, err := b.env.queue(ctx, label+"-plain", false)
			if err != nil {
				return err
			}
			defer b.env.drop(ctx, q)
			p, err = plainSend(ctx, b.client, q, evs)
			return err
		}, func() error {
			if err := tb.preload(ctx, evs); err != nil {
				return fmt.Errorf("preload the textbook outbox: %w", err)
			}
			q, err := b.env.queue(ctx, label+"-textbook", false)
			if err != nil {
				return err
			}
			defer b.env.drop(ctx, q)
			if t, err = tb.relay(ctx, b.client, q, n); err != nil {
				return fmt.Errorf("textbook relay: %w", err)
			}
			return nil
		}, func() error {
			if err := fillOutbox(ctx, evs, commit); err != nil {
				return fmt.Errorf("preload the outbox: %w", err)
			}
			q, err := b.env.queue(ctx, label+"-relay", false)
			if err != nil {
				return err
			}
			defer b.env.drop(ctx, q)
			r, err = relayRun(ctx, b.client, store, q, n)
			return err
		})
		return []float64{p, t, r}, err
	}, &plain, &textbook, &relay)
	return relay, plain, textbook, err
}

// fillOutbox commits evs outboxPerCommitTx at a time, 8 transactions at
// once, as producers would.
func fillOutbox(ctx context.Context, evs []outbox.Event, commit func(ctx context.Context, evs []outbox.Event) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for from := 0; from < len(evs); from += outboxPerCommitTx {
		chunk := evs[from:min(from+outboxPerCommitTx, len(evs))]
		g.Go(func() error { return commit(gctx, chunk) })
	}
	return g.Wait()
}

// fillEntities commits evs outboxPerCommitTx at a time, each transaction
// of one entity, the entities' writers at once: writers of one entity
// would only wait for (PostgreSQL) or cancel (DynamoDB) each other.
func fillEntities(ctx context.Context, evs []outbox.Event, commit func(ctx context.Context, evs []outbox.Event) error) error {
	var order []string
	runs := map[string][]outbox.Event{}
	for _, ev := range evs {
		if _, ok := runs[ev.Entity]; !ok {
			order = append(order, ev.Entity)
		}
		runs[ev.Entity] = append(runs[ev.Entity], ev)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, e := range order {
		run := runs[e]
		g.Go(func() error {
			for from := 0; from < len(run); from += outboxPerCommitTx {
				if err := commit(gctx, run[from:min(from+outboxPerCommitTx, len(run))]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// relayPair is the two rows of a relay: against the send loop (raw) and
// against the textbook relay loop of the same store (the target).
func (b *bench) relayPair(store string, n int, relay, plain, textbook sample, textbookHow string) []row {
	const g = "Outbox relay"
	return []row{
		{group: g, name: "outbox relay, " + store + ", vs plain SendMessageBatch loop (raw)", value: relay, limit: plain, ratio: ratios(relay, plain), unit: "events/s",
			note: fmt.Sprintf("%s, in the order send loop, textbook relay, relay; %d events of %d entities per run, each on a fresh queue; relay: outbox.Relay with its defaults (batches of 100, 4 sends at once), "+
				"timed from its start to the last publish, its outbox filled before (untimed); limit: a plain loop sending the same events with the same attributes, SendMessageBatch of 10, %d calls at once; "+
				"no target: any relay also reads and deletes every event in its store, which the send loop does not (the next row's limit does)",
				b.interleaved(), n, outboxEntities, outboxSenders)},
		row{group: g, name: "outbox relay, " + store + ", vs textbook relay loop", value: relay, limit: textbook, ratio: ratios(relay, textbook), unit: "events/s",
			note: "the same runs; limit: " + textbookHow + ", the same sends; " +
				"target: the same reads, sends and deletes, so ≥ 0.95 (the relay's per-entity order and partition leases must cost next to nothing where entities are many)"}.with(atLeast(0.95)),
	}
}

// relayFewRow measures a relay on outboxFewEntities entities with long
// runs against the ordered send loop, interleaved as relayRows does, each
// side on a fresh queue, the relay's outbox filled by commit before its
// start (untimed).
func (b *bench) relayFewRow(label, store string, n int, st outbox.Store, commit func(ctx context.Context, evs []outbox.Event) error) (row, error) {
	ctx := b.ctx
	var relay, ordered sample
	err := b.interleave(label, func(round int) ([]float64, error) {
		evs := outboxEvents(fmt.Sprintf("%s%d", label, round), n, outboxFewEntities)
		var o, r float64
		err := inTurn(round, func() error {
			q, err := b.env.queue(ctx, label+"-ordered", false)
			if err != nil {
				return err
			}
			defer b.env.drop(ctx, q)
			o, err = orderedSend(ctx, b.client, q, evs)
			return err
		}, func() error {
			if err := fillEntities(ctx, evs, commit); err != nil {
				return fmt.Errorf("preload the outbox: %w", err)
			}
			q, err := b.env.queue(ctx, label+"-relay", false)
			if err != nil {
				return err
			}
			defer b.env.drop(ctx, q)
			r, err = relayRun(ctx, b.client, st, q, n)
			return err
		})
		return []float64{o, r}, err
	}, &ordered, &relay)
	if err != nil {
		return row{}, err
	}
	return row{group: "Outbox relay", name: fmt.Sprintf("outbox relay, %s, %d entities, vs ordered send loop", store, outboxFewEntities), value: relay, limit: ordered, ratio: ratios(relay, ordered), unit: "events/s",
		note: fmt.Sprintf("%s, in the order ordered loop, relay; %d events of %d entities per run (%d of each), each side on a fresh queue; relay: outbox.Relay with its defaults, timed from its start to the last publish, its outbox filled before (untimed, %d events a transaction of one entity); "+
			"limit: what per-entity commit order allows: an entity's event goes out only once its previous one was accepted, so at most one event of an entity is in flight, "+
			"%d in all: the loop sends waves of each entity's next event, one SendMessageBatch call of %d after the other (a tenth of the plain loop's 10 × %d in flight); "+
			"target: the same calls one after the other, the relay adding one read and one delete per batch of 100 (one per %d calls), so ≥ 0.9",
			b.interleaved(), n, outboxFewEntities, n/outboxFewEntities, outboxPerCommitTx, outboxFewEntities, outboxFewEntities, outboxSenders, 100/outboxFewEntities)}.with(atLeast(0.9)), nil
}

// outboxRows: the DynamoDB outbox relay against the plain send loop.
func (b *bench) outboxRows() ([]row, error) {
	ctx := b.ctx
	n := max(b.n/4, 10)
	table := fmt.Sprintf("%s-outbox", b.env.prefix)
	if err := outboxdynamo.CreateTable(ctx, b.ddb, table); err != nil {
		return nil, err
	}
	b.env.tables = append(b.env.tables, table)
	store, err := outboxdynamo.New(outboxdynamo.Config{Client: b.ddb, Table: table})
	if err != nil {
		return nil, err
	}
	commit := func(ctx context.Context, evs []outbox.Event) error {
		return store.Commit(ctx, func() ([]types.TransactWriteItem, error) { return store.Put(evs...) })
	}
	textbook := fmt.Sprintf("%s-textbook", b.env.prefix)
	if err := outboxdynamo.CreateTable(ctx, b.ddb, textbook); err != nil {
		return nil, err
	}
	b.env.tables = append(b.env.tables, textbook)
	relay, plain, tb, err := b.relayRows("outbox-dynamo", n, store, commit, textbookDynamo{ddb: b.ddb, table: textbook})
	if err != nil {
		return nil, err
	}
	few, err := b.relayFewRow("outbox-dynamo-few", "DynamoDB", n, store, commit)
	if err != nil {
		return nil, err
	}
	return append(b.relayPair("DynamoDB", n, relay, plain, tb,
		"a plain relay loop on a plain table (16 partition keys): Query 100 items, send them, BatchWriteItem their deletes, partition by partition"), few), nil
}

// textbookDynamo is the plain relay loop of a DynamoDB outbox, the limit
// of the sqsonce relay on the same calls: events as items pk "q#<p>" (16
// partitions) and sk their zero-padded number; the loop queries a
// partition 100 items at a time, sends them (SendMessageBatch of 10,
// outboxSenders at once) and deletes them with BatchWriteItem, until every
// partition is empty. No leases, no per-entity order: one relay only.
type textbookDynamo struct {
	ddb   *dynamodb.Client
	table string
}

const textbookPartitions = 16

func (t textbookDynamo) preload(ctx context.Context, evs []outbox.Event) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for from := 0; from < len(evs); from += 25 {
		g.Go(func() error {
			var reqs []types.WriteRequest
			for i := from; i < min(from+25, len(evs)); i++ {
				ev := evs[i]
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
					"pk": sAttr(fmt.Sprintf("q#%d", i%textbookPartitions)), "sk": sAttr(fmt.Sprintf("%012d", i)),
					"id": sAttr(ev.ID), "type": sAttr(ev.Type), "payload": sAttr(ev.Payload),
				}}})
			}
			for len(reqs) > 0 {
				out, err := t.ddb.BatchWriteItem(gctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{t.table: reqs}})
				if err != nil {
					return err
				}
				reqs = out.UnprocessedItems[t.table]
			}
			return nil
		})
	}
	return g.Wait()
}

func (t textbookDynamo) relay(ctx context.Context, client *sqs.Client, queueURL string, n int) (float64, error) {
	start := time.Now()
	sent := 0
	for p := range textbookPartitions {
		for {
			out, err := t.ddb.Query(ctx, &dynamodb.QueryInput{
				TableName: aws.String(t.table), KeyConditionExpression: aws.String("pk = :pk"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sAttr(fmt.Sprintf("q#%d", p))},
				Limit:                     aws.Int32(100), ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return 0, err
			}
			if len(out.Items) == 0 {
				break
			}
			evs := make([]outbox.Event, len(out.Items))
			for i, item := range out.Items {
				get := func(name string) string { v, _ := item[name].(*types.AttributeValueMemberS); return v.Value }
				evs[i] = outbox.Event{ID: get("id"), Type: get("type"), Payload: get("payload")}
			}
			if _, err := plainSend(ctx, client, queueURL, evs); err != nil {
				return 0, err
			}
			for from := 0; from < len(out.Items); from += 25 {
				var reqs []types.WriteRequest
				for _, item := range out.Items[from:min(from+25, len(out.Items))] {
					reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]}}})
				}
				for len(reqs) > 0 {
					res, err := t.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{t.table: reqs}})
					if err != nil {
						return 0, err
					}
					reqs = res.UnprocessedItems[t.table]
				}
			}
			sent += len(evs)
		}
	}
	if sent != n {
		return 0, fmt.Errorf("textbook relay sent %d of %d events", sent, n)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
