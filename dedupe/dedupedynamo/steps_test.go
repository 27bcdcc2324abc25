package dedupedynamo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/step"
)

// replayTx sends every TransactWriteItems twice and returns the second
// answer, as the SDK's retryer does when a commit was applied but its
// answer was lost (with a fresh idempotency token, so DynamoDB runs it
// again).
type replayTx struct {
	dedupedynamo.DynamoDBAPI
	replays int
}

func (r *replayTx) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if _, err := r.DynamoDBAPI.TransactWriteItems(ctx, in, opts...); err != nil {
		return nil, err
	}
	r.replays++
	in.ClientRequestToken = nil
	return r.DynamoDBAPI.TransactWriteItems(ctx, in, opts...)
}

// stepsThenTx is a handler under dedupe.Middleware with s: step "charge"
// (counted in charges; its first answer lost when lose is set), then the
// credit in Transactional of the same store, which completes the claimed
// record with the credit.
func stepsThenTx(l *ledger, s *dedupedynamo.Store, charges *int, lose bool) consumer.Handler {
	charged := false
	tx := dedupedynamo.Transactional(s, l.credit, nil)
	return consumer.Chain(consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		_, err := step.Run(ctx, "charge", step.Options{
			ReconcileFunc: func(context.Context) (step.Reconciliation, error) {
				if charged {
					return step.Done([]byte("ch")), nil
				}
				return step.NotDone(), nil
			},
		}, func(context.Context) ([]byte, error) {
			*charges++
			charged = true
			if lose {
				lose = false
				return nil, io.ErrUnexpectedEOF
			}
			return []byte("ch"), nil
		})
		if err != nil {
			return err
		}
		return tx.Handle(ctx, msg)
	}), stepsWrap(s, dedupe.Config{NowFunc: l.clock}))
}

// The final step completes the claimed record in the credit's
// transaction: a charge whose answer was lost is reconciled, the credit
// applies once, and a redelivery is a duplicate.
func TestStepsWithTransactionalFinalStep(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	charges := 0
	h := stepsThenTx(l, l.store, &charges, true)
	if r := consumertest.Process(context.Background(), h, msg("m1", "credit-1", "acct:5")); r.Outcome != consumer.OutcomeRetry {
		t.Fatalf("lost charge answer: %s %v, want a retry", r.Outcome, r.Err)
	}
	for i, want := range []consumer.Outcome{consumer.OutcomeAck, consumer.OutcomeDuplicate} {
		if r := consumertest.Process(context.Background(), h, msg(fmt.Sprint("m", i+2), "credit-1", "acct:5")); r.Outcome != want {
			t.Fatalf("delivery %d: %s %v, want %s", i+2, r.Outcome, r.Err, want)
		}
	}
	if charges != 1 || l.balance(t, "acct") != 5 {
		t.Fatalf("charged %d times, balance %d; want 1 and 5", charges, l.balance(t, "acct"))
	}
}

// A commit applied whose answer was lost, sent again: the record was
// completed by this claim's token, so the retry is a success, not a lost
// lease.
func TestStepsTransactionalReplayedCommit(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	api := &replayTx{DynamoDBAPI: l.client}
	s, err := dedupedynamo.New(dedupedynamo.Config{Client: api, Table: l.dedupe, Namespace: "ledger", NowFunc: l.clock})
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	r := consumertest.Process(context.Background(), stepsThenTx(l, s, &charges, false), msg("m1", "credit-1", "acct:7"))
	if r.Outcome != consumer.OutcomeAck || api.replays != 1 {
		t.Fatalf("outcome %s (%v) after %d replays, want ack after 1", r.Outcome, r.Err, api.replays)
	}
	if l.balance(t, "acct") != 7 {
		t.Fatalf("balance %d, want 7", l.balance(t, "acct"))
	}
}

// A claim taken over before the final step commits nothing.
func TestStepsTransactionalLeaseLost(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	tx := dedupedynamo.Transactional(l.store, l.credit, nil)
	h := consumer.Chain(consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		l.advance(2 * time.Minute)
		if c, err := l.store.Claim(ctx, m.Key(), dedupe.Fingerprint(m.Body), time.Minute); err != nil || c.Status != dedupe.Claimed {
			return fmt.Errorf("takeover: %+v %v", c, err)
		}
		return tx.Handle(ctx, m)
	}), stepsWrap(l.store, dedupe.Config{NowFunc: l.clock}))
	r := consumertest.Process(context.Background(), h, msg("m1", "credit-1", "acct:3"))
	if r.Outcome != consumer.OutcomeRetry || !errors.Is(r.Err, dedupe.ErrNotOwner) {
		t.Fatalf("outcome %s (%v), want a retry with ErrNotOwner", r.Outcome, r.Err)
	}
	if l.balance(t, "acct") != 0 {
		t.Fatalf("balance %d: the stale owner committed", l.balance(t, "acct"))
	}
}

// Calls applied whose answers were lost and that the SDK sent again: a
// takeover that keeps steps, a save of steps, and a release that keeps
// them are still the caller's own.
func TestStepCallsRetriedAreOurs(t *testing.T) {
	t.Parallel()
	client, table := newTable(t)
	now := time.Now()
	clock := func() time.Time { return now }
	s := newStore(t, replayAPI{client}, table, clock)
	ctx := context.Background()
	c, err := s.Claim(ctx, "k1", "fp", time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("claim: %+v %v", c, err)
	}
	steps := map[string]step.Record{"charge": {Status: step.StatusStarted, At: now.UTC().Truncate(time.Millisecond)}}
	if err := s.SaveSteps(ctx, "k1", c.Token, steps); err != nil {
		t.Fatalf("replayed SaveSteps: %v", err)
	}
	now = now.Add(2 * time.Minute)
	c2, err := s.Claim(ctx, "k1", "fp", time.Minute)
	if err != nil || c2.Status != dedupe.Claimed || c2.Steps["charge"].Status != step.StatusStarted {
		t.Fatalf("replayed takeover: %+v %v; want claimed with the step started", c2, err)
	}
	if err := s.Release(ctx, "k1", c2.Token); err != nil {
		t.Fatalf("replayed release keeping steps: %v", err)
	}
	if c3, err := s.Claim(ctx, "k1", "fp", time.Minute); err != nil || c3.Status != dedupe.Claimed || len(c3.Steps) != 1 {
		t.Fatalf("claim after the release: %+v %v; want claimed with the steps", c3, err)
	}
}

// stepsWrap is the dedupe middleware of cfg with store (New refuses no
// config these tests give it).
func stepsWrap(store dedupe.Store, cfg dedupe.Config) consumer.Middleware {
	cfg.Store = store
	m, err := dedupe.New(cfg)
	if err != nil {
		panic(err)
	}
	return m.Wrap
}
