package dedupedynamo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
)

// callCounter counts the DynamoDB calls a handler makes.
type callCounter struct {
	*dynamodb.Client
	gets, txs, puts atomic.Int64
}

func (c *callCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.Client.GetItem(ctx, in, o...)
}

func (c *callCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.puts.Add(1)
	return c.Client.PutItem(ctx, in, o...)
}

func (c *callCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.txs.Add(1)
	return c.Client.TransactWriteItems(ctx, in, o...)
}

// TestTransactionalDuplicateRuns delivers one message, then the same key
// and body dups more times after its commit, and counts the TxFunc's runs
// and the DynamoDB calls of the duplicates: by default every duplicate
// runs the function and sends a transaction, which the dedupe record
// cancels; with SkipCompleted each costs one read.
func TestTransactionalDuplicateRuns(t *testing.T) {
	t.Parallel()
	const dups = 5
	for _, tc := range []struct {
		name             string
		skip             bool
		runs, txs, reads int64
	}{
		{"default", false, 1 + dups, dups, 0},
		{"SkipCompleted", true, 1, 0, dups},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger(t)
			calls := &callCounter{Client: l.client}
			s, err := dedupedynamo.New(dedupedynamo.Config{Client: calls, Table: l.dedupe, Namespace: "dups", NowFunc: l.clock})
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			h := dedupedynamo.Transactional(s, func(ctx context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
				runs.Add(1)
				return l.credit(ctx, m)
			}, &dedupedynamo.TxOptions{SkipCompleted: tc.skip})
			ctx := context.Background()
			if r := consumertest.Process(ctx, h, msg("m0", "once", "erin:3")); r.Outcome != consumer.OutcomeAck {
				t.Fatalf("first delivery: %s (%v), want ack", r.Outcome, r.Err)
			}
			calls.gets.Store(0)
			calls.txs.Store(0)
			for i := range dups {
				if r := consumertest.Process(ctx, h, msg(fmt.Sprintf("m%d", i+1), "once", "erin:3")); r.Outcome != consumer.OutcomeDuplicate {
					t.Fatalf("duplicate %d: %s (%v), want duplicate", i+1, r.Outcome, r.Err)
				}
			}
			if n := runs.Load(); n != tc.runs {
				t.Errorf("the function ran %d times for 1 delivery and %d duplicates after its commit, want %d", n, dups, tc.runs)
			}
			if n := calls.txs.Load(); n != tc.txs {
				t.Errorf("%d duplicates sent %d TransactWriteItems, want %d", dups, n, tc.txs)
			}
			if n, p := calls.gets.Load(), calls.puts.Load(); n != tc.reads || p != 0 {
				t.Errorf("%d duplicates made %d GetItem and %d PutItem, want %d and 0 (a read, no claim)", dups, n, p, tc.reads)
			}
			if b := l.balance(t, "erin"); b != 3 {
				t.Fatalf("balance %d, want 3 (applied once)", b)
			}
		})
	}
}

// TestSkipCompletedRace: two first deliveries of one message that both
// read the record before either commits both run the function (the read
// is no claim), and the transaction commits one: one ack, one duplicate,
// the effect once.
func TestSkipCompletedRace(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	var runs atomic.Int64
	var inFn sync.WaitGroup
	inFn.Add(2)
	h := dedupedynamo.Transactional(l.store, func(ctx context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		runs.Add(1)
		inFn.Done()
		inFn.Wait() // both deliveries are past their read
		return l.credit(ctx, m)
	}, &dedupedynamo.TxOptions{SkipCompleted: true})
	var wg sync.WaitGroup
	outcomes := make([]consumertest.Result, 2)
	for i := range outcomes {
		wg.Go(func() {
			outcomes[i] = consumertest.Process(context.Background(), h, msg(fmt.Sprintf("m%d", i), "race", "frank:4"))
		})
	}
	wg.Wait()
	got := map[consumer.Outcome]int{}
	for _, r := range outcomes {
		got[r.Outcome]++
	}
	if got[consumer.OutcomeAck] != 1 || got[consumer.OutcomeDuplicate] != 1 {
		t.Fatalf("outcomes %s (%v), %s (%v); want one ack and one duplicate", outcomes[0].Outcome, outcomes[0].Err, outcomes[1].Outcome, outcomes[1].Err)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the function ran %d times, want 2 (both read before either committed)", n)
	}
	if b := l.balance(t, "frank"); b != 4 {
		t.Fatalf("balance %d, want 4 (applied once)", b)
	}
}

// TestSkipCompletedOnlyACompletedRecord: the read skips only a live
// COMPLETED record of the same body. Key reuse, a lease-mode claim in
// progress and an expired record run the function and get the
// transaction's answer, as without the option.
func TestSkipCompletedOnlyACompletedRecord(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	var runs atomic.Int64
	h := dedupedynamo.Transactional(l.store, func(ctx context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		runs.Add(1)
		return l.credit(ctx, m)
	}, &dedupedynamo.TxOptions{SkipCompleted: true})
	run := func(id, key, body string) (consumertest.Result, int64) {
		before := runs.Load()
		r := consumertest.Process(ctx, h, msg(id, key, body))
		return r, runs.Load() - before
	}
	if r, n := run("m1", "k", "gina:1"); r.Outcome != consumer.OutcomeAck || n != 1 {
		t.Fatalf("first delivery: %s (%v), %d runs; want ack, 1 run", r.Outcome, r.Err, n)
	}
	if r, n := run("m2", "k", "gina:9"); r.Outcome != consumer.OutcomeDeadLetter || n != 1 {
		t.Fatalf("key reuse: %s (%v), %d runs; want dead-lettered by the transaction, 1 run", r.Outcome, r.Err, n)
	}
	c, err := l.store.Claim(ctx, "held", dedupe.Fingerprint("gina:2"), time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatal(c, err)
	}
	if r, n := run("m3", "held", "gina:2"); r.Outcome != consumer.OutcomeRetry || n != 1 {
		t.Fatalf("key held by a lease-mode claim: %s (%v), %d runs; want retry, 1 run", r.Outcome, r.Err, n)
	}
	l.advance(dedupe.DefaultTTL + time.Hour) // k's record expires
	if r, n := run("m4", "k", "gina:5"); r.Outcome != consumer.OutcomeAck || n != 1 {
		t.Fatalf("after expiry: %s (%v), %d runs; want ack, 1 run", r.Outcome, r.Err, n)
	}
	if b := l.balance(t, "gina"); b != 6 {
		t.Fatalf("balance %d, want 6", b)
	}
}

// failingGet is fakeTx whose GetItem fails with err.
type failingGet struct {
	*fakeTx
	err error
}

func (f failingGet) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, f.err
}

// TestSkipCompletedReadFails: the read only saves work. When it fails the
// function runs and the transaction decides, unless the handler's
// context is done.
func TestSkipCompletedReadFails(t *testing.T) {
	t.Parallel()
	f := failingGet{fakeTx: &fakeTx{}, err: &types.InternalServerError{}}
	s, err := dedupedynamo.New(dedupedynamo.Config{Client: f, Namespace: "unit"})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	h := dedupedynamo.Transactional(s, func(ctx context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		runs.Add(1)
		return oneWrite(ctx, m)
	}, &dedupedynamo.TxOptions{SkipCompleted: true})
	if err := h.Handle(context.Background(), msg("m", "k", "b")); err != nil {
		t.Fatalf("failed read: %v, want the transaction's answer (committed)", err)
	}
	if runs.Load() != 1 || len(f.inputs) != 1 {
		t.Fatalf("failed read: %d runs, %d transactions; want 1 and 1", runs.Load(), len(f.inputs))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Handle(ctx, msg("m", "k2", "b")); !errors.Is(err, context.Canceled) {
		t.Fatalf("read failed with the context done: %v, want context.Canceled", err)
	}
	if runs.Load() != 1 || len(f.inputs) != 1 {
		t.Fatalf("context done: %d runs, %d transactions; want nothing more run", runs.Load(), len(f.inputs))
	}
}
