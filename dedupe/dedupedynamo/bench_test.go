package dedupedynamo_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// benchConcurrency is the number of concurrent callers in every benchmark
// (and the consumer's Concurrency), so the figures compare.
const benchConcurrency = 16

func parallel(b *testing.B, fn func(i int64) error) {
	b.Helper()
	b.SetParallelism(max(benchConcurrency/runtime.GOMAXPROCS(0), 1))
	var n atomic.Int64
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := fn(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// BenchmarkClaim: the store's claim (one conditional PutItem with
// ALL_OLD), then the same claim followed by Complete (lease mode's two
// writes per message), against a plain conditional PutItem loop on the same
// table at the same concurrency: the table's limit.
//
//	go test -run '^$' -bench . -benchtime 3000x ./dedupe/dedupedynamo/
func BenchmarkClaim(b *testing.B) {
	client := testenv.Dynamo(b)
	table := testenv.Name("sqsonce-bench")
	if err := dedupedynamo.CreateTable(context.Background(), client, table); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: client, Table: table, Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// Each benchmark function runs more than once (b.N=1 first): keys are
	// unique per run.
	var runs atomic.Int64
	run := func() string { return fmt.Sprintf("%d-%d", time.Now().UnixNano(), runs.Add(1)) }

	b.Run("plain-conditional-put", func(b *testing.B) {
		run := run()
		parallel(b, func(i int64) error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(table),
				Item: map[string]types.AttributeValue{
					"pk":      &types.AttributeValueMemberS{Value: fmt.Sprintf("plain-%s-%d", run, i)},
					"payload": &types.AttributeValueMemberS{Value: "x"},
				},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			})
			return err
		})
	})
	b.Run("claim", func(b *testing.B) {
		run := run()
		parallel(b, func(i int64) error {
			c, err := store.Claim(ctx, fmt.Sprintf("claim-%s-%d", run, i), "fp", time.Minute)
			if err == nil && c.Status != dedupe.Claimed {
				err = fmt.Errorf("claim: %s", c.Status)
			}
			return err
		})
	})
	b.Run("claim+complete", func(b *testing.B) {
		run := run()
		parallel(b, func(i int64) error {
			key := fmt.Sprintf("cc-%s-%d", run, i)
			c, err := store.Claim(ctx, key, "fp", time.Minute)
			if err != nil {
				return err
			}
			return store.Complete(ctx, key, c.Token)
		})
	})
	b.Run("duplicate-claim", func(b *testing.B) {
		key := "dup-" + run()
		c, err := store.Claim(ctx, key, "fp", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Complete(ctx, key, c.Token); err != nil {
			b.Fatal(err)
		}
		parallel(b, func(int64) error {
			_, err := store.Claim(ctx, key, "fp", time.Minute)
			return err
		})
	})
}

// BenchmarkEndToEnd: messages/s through a real consumer on fauxqs with
// the dedupe on DynamoDB Local, b.N messages per mode (sent before the
// timer starts): the transactional handler (ADD balance), lease mode
// (claim + complete around a handler doing the same write), and no
// dedupe (the same write as a plain conditional PutItem).
//
//	go test -run '^$' -bench EndToEnd -benchtime 2000x ./dedupe/dedupedynamo/
func BenchmarkEndToEnd(b *testing.B) {
	for _, mode := range []string{"transactional", "lease", "no-dedupe-plain-put"} {
		b.Run(mode, func(b *testing.B) {
			client := testenv.Dynamo(b)
			sq := testenv.SQS(b)
			table := testenv.Name("sqsonce-bench")
			if err := dedupedynamo.CreateTable(context.Background(), client, table); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
			})
			accounts := testenv.Table(b, client, "sqsonce-bench-acct", "id", "")
			store, err := dedupedynamo.New(dedupedynamo.Config{Client: client, Table: table, Namespace: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			queueURL, _ := testenv.QueueWithDLQ(b, sq, "sqsonce-bench", testenv.QueueOptions{VisibilityTimeout: 30})
			var msgs []send
			for i := range b.N {
				msgs = append(msgs, send{id: fmt.Sprintf("b-%d", i), body: fmt.Sprintf("acct-%d:1", i%50)})
			}
			sendAll(b, sq, queueURL, msgs)
			l := &ledger{client: client, accounts: accounts, store: store}
			var handled atomic.Int64
			var handler consumer.Handler
			var mw []consumer.Middleware
			switch mode {
			case "transactional":
				handler = dedupedynamo.Transactional(store, l.credit, nil)
			case "lease":
				dd, err := dedupe.New(dedupe.Config{Store: store})
				if err != nil {
					b.Fatal(err)
				}
				mw = []consumer.Middleware{dd.Wrap}
				handler = consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
					ws, err := l.credit(ctx, m)
					if err != nil {
						return err
					}
					_, err = client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: ws[0].Update.TableName, Key: ws[0].Update.Key,
						UpdateExpression: ws[0].Update.UpdateExpression, ExpressionAttributeValues: ws[0].Update.ExpressionAttributeValues})
					return err
				})
			default:
				handler = consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
					_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
						TableName:           aws.String(table),
						Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: m.Key()}},
						ConditionExpression: aws.String("attribute_not_exists(pk)"),
					})
					return err
				})
			}
			counted := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				err := handler.Handle(ctx, m)
				if err == nil {
					handled.Add(1)
				}
				return err
			})
			c, err := consumer.New(consumer.Config{Client: sq, QueueURL: queueURL, Handler: counted, Middleware: mw,
				Concurrency: benchConcurrency, WaitTime: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() { done <- c.Run(ctx) }()
			for handled.Load() < int64(b.N) {
				time.Sleep(20 * time.Millisecond)
				if time.Since(start) > 3*time.Minute {
					b.Fatalf("only %d of %d handled", handled.Load(), b.N)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}
