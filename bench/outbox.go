package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/outbox"
	outboxdynamo "github.com/sqsonce/sqsonce/outbox/dynamo"
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

// outboxEvents are the n events of one run, of entities "<prefix>-e<k>".
func outboxEvents(prefix string, n int) []outbox.Event {
	evs := make([]outbox.Event, n)
	for i := range evs {
		evs[i] = outbox.Event{
			ID:      fmt.Sprintf("%s-%d", prefix, i),
			Entity:  fmt.Sprintf("%s-e%d", prefix, i%outboxEntities),
			Type:    outboxEventType,
			Payload: fmt.Sprintf(`{"id":"%s-%d","account":"a%d","amount":1}`, prefix, i, i%outboxEntities),
		}
	}
	return evs
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

// relayRows measures a relay against the plain send loop, interleaved:
// a warm-up round, then b.runs rounds of (plain loop, relay), each on a
// fresh queue, the relay's outbox preloaded (untimed) by preload.
func (b *bench) relayRows(label string, n int, store outbox.Store, preload func(evs []outbox.Event) error) (relay, plain sample, err error) {
	ctx := b.ctx
	for round := range b.runs + 1 {
		prefix := fmt.Sprintf("%s%d", label, round)
		evs := outboxEvents(prefix, n)
		q, err := b.env.queue(ctx, label+"-plain", false)
		if err != nil {
			return nil, nil, err
		}
		p, err := plainSend(ctx, b.client, q, evs)
		if err != nil {
			return nil, nil, err
		}
		if err := preload(evs); err != nil {
			return nil, nil, fmt.Errorf("preload the outbox: %w", err)
		}
		q2, err := b.env.queue(ctx, label+"-relay", false)
		if err != nil {
			return nil, nil, err
		}
		r, err := relayRun(ctx, b.client, store, q2, n)
		if err != nil {
			return nil, nil, err
		}
		if round == 0 {
			continue // the warm-up
		}
		relay, plain = append(relay, r), append(plain, p)
		fmt.Fprintf(b.errw, "bench:   %s: run %d of %d done\n", label, round, b.runs)
	}
	return relay, plain, nil
}

// outboxNote says how the relay rows ran.
func (b *bench) outboxNote(n int) string {
	return fmt.Sprintf("%s; %d events of %d entities per run, each on a fresh queue; relay: outbox.Relay with its defaults (batches of 100, 4 sends at once), timed from its start to the last publish, its outbox filled before (untimed); "+
		"limit: a plain loop sending the same events with the same attributes, SendMessageBatch of 10, %d calls at once",
		b.interleaved(), n, outboxEntities, outboxSenders)
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
	preload := func(evs []outbox.Event) error {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for from := 0; from < len(evs); from += outboxPerCommitTx {
			chunk := evs[from:min(from+outboxPerCommitTx, len(evs))]
			g.Go(func() error {
				return store.Commit(gctx, func() ([]types.TransactWriteItem, error) { return store.Put(chunk...) })
			})
		}
		return g.Wait()
	}
	relay, plain, err := b.relayRows("outbox-dynamo", n, store, preload)
	if err != nil {
		return nil, err
	}
	return []row{
		row{group: "Outbox relay", name: "outbox relay, DynamoDB, vs plain SendMessageBatch loop", value: relay, limit: plain, ratio: ratios(relay, plain), unit: "events/s",
			note: b.outboxNote(n) + "; target: " + outboxTarget}.with(atLeast(outboxMin)),
	}, nil
}

// outboxMin is the relays' target ratio and outboxTarget why.
const (
	outboxMin    = 0.9
	outboxTarget = "the relay adds its store's reads and deletes to the same sends, ≥ 0.9"
)
