package dedupedynamo_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// ledger is a dedupe store plus an accounts table.
type ledger struct {
	client   *dynamodb.Client
	dedupe   string
	accounts string
	store    *dedupedynamo.Store
	now      time.Time
	mu       sync.Mutex
}

func newLedger(t *testing.T) *ledger {
	t.Helper()
	client, table := newTable(t)
	l := &ledger{client: client, dedupe: table, now: time.Now()}
	l.accounts = testenv.Table(t, client, "sqsonce-accounts", "id", "")
	s, err := dedupedynamo.New(dedupedynamo.Config{Client: client, Table: table, Namespace: "ledger", NowFunc: l.clock})
	if err != nil {
		t.Fatal(err)
	}
	l.store = s
	return l
}

func (l *ledger) clock() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.now
}

func (l *ledger) advance(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = l.now.Add(d)
}

// credit is the effect of a message "account:amount".
func (l *ledger) credit(_ context.Context, msg *consumer.Message) ([]types.TransactWriteItem, error) {
	account, amount, ok := strings.Cut(msg.Body, ":")
	if !ok {
		return nil, consumer.Permanent(errors.New("bad body"))
	}
	return []types.TransactWriteItem{{Update: &types.Update{
		TableName:                 aws.String(l.accounts),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: account}},
		UpdateExpression:          aws.String("ADD balance :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: amount}},
	}}}, nil
}

func (l *ledger) balance(t *testing.T, account string) int {
	t.Helper()
	out, err := l.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(l.accounts), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: account}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(testenv.Scalar(out.Item["balance"]))
	return n
}

func msg(id, key, body string) *consumer.Message {
	m := delivery.New(sqstypes.Message{MessageId: aws.String(id), Body: aws.String(body)}, "queue", time.Now())
	delivery.SetKey(m, key)
	return m
}

func TestTransactionalOnce(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	h := dedupedynamo.Transactional(l.store, l.credit, nil)
	ctx := context.Background()
	if err := h.Handle(ctx, msg("m1", "k1", "alice:10")); err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := h.Handle(ctx, msg("m2", "k1", "alice:10")); !errors.Is(err, consumer.ErrDuplicate) {
		t.Fatalf("redelivery: %v, want ErrDuplicate", err)
	}
	if b := l.balance(t, "alice"); b != 10 {
		t.Fatalf("balance %d, want 10", b)
	}
	// Key reuse: permanent, class key_reuse, nothing applied.
	err := h.Handle(ctx, msg("m3", "k1", "alice:99"))
	var kr *dedupe.KeyReuseError
	var pe *consumer.PermanentError
	if !errors.As(err, &kr) || !errors.As(err, &pe) || kr.FailureClass() != consumer.ClassKeyReuse {
		t.Fatalf("key reuse: %v", err)
	}
	// After the record expires the key may be used again.
	l.advance(dedupe.DefaultTTL + time.Hour)
	if err := h.Handle(ctx, msg("m4", "k1", "alice:5")); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if b := l.balance(t, "alice"); b != 15 {
		t.Fatalf("balance %d, want 15", b)
	}
}

// TestTransactionalRace: 20 concurrent deliveries of one message apply it
// once; every other delivery is a duplicate or asks for a retry.
func TestTransactionalRace(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	h := dedupedynamo.Transactional(l.store, l.credit, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acks, dups, others := 0, 0, 0
	for i := range 20 {
		wg.Go(func() {
			err := h.Handle(context.Background(), msg("m"+strconv.Itoa(i), "race", "bob:7"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				acks++
			case errors.Is(err, consumer.ErrDuplicate):
				dups++
			default:
				others++
				t.Logf("delivery %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if acks != 1 {
		t.Fatalf("%d deliveries committed (dups %d, other %d), want exactly 1", acks, dups, others)
	}
	if b := l.balance(t, "bob"); b != 7 {
		t.Fatalf("balance %d, want 7", b)
	}
}

func TestTransactionalUserConditionFails(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	debit := func(_ context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		return []types.TransactWriteItem{{Update: &types.Update{
			TableName:           aws.String(l.accounts),
			Key:                 map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "carol"}},
			UpdateExpression:    aws.String("ADD balance :a"),
			ConditionExpression: aws.String("balance >= :min"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":a": &types.AttributeValueMemberN{Value: "-5"}, ":min": &types.AttributeValueMemberN{Value: "5"},
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}}, nil
	}
	h := dedupedynamo.Transactional(l.store, debit, nil)
	err := h.Handle(ctx, msg("m1", "debit-1", "x"))
	var ce *dedupedynamo.ConditionError
	if !errors.As(err, &ce) || ce.Index != 0 || aws.ToString(ce.Reason.Code) != "ConditionalCheckFailed" {
		t.Fatalf("user condition: %v, want ConditionError on write 0", err)
	}
	var can *types.TransactionCanceledException
	if !errors.As(err, &can) {
		t.Fatalf("ConditionError does not wrap the cancellation: %v", err)
	}
	// Nothing was written, the dedupe record included: once the account is
	// funded, the retry applies.
	if testenv.Item(t, l.client, l.dedupe, l.store.PK("debit-1")) != nil {
		t.Fatal("dedupe record written although the transaction was cancelled")
	}
	if err := dedupedynamo.Transactional(l.store, l.credit, nil).Handle(ctx, msg("m0", "fund", "carol:10")); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(ctx, msg("m1", "debit-1", "x")); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if b := l.balance(t, "carol"); b != 5 {
		t.Fatalf("balance %d, want 5", b)
	}
}

func TestTransactionalVersionGuard(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	// Body "version:name": set the profile's name if the version is newer.
	h := dedupedynamo.Transactional(l.store, func(_ context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		v, name, _ := strings.Cut(m.Body, ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		return []types.TransactWriteItem{dedupedynamo.VersionGuard(types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(l.accounts),
			Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "profile"}},
			UpdateExpression:          aws.String("SET #n = :n"),
			ExpressionAttributeNames:  map[string]string{"#n": "name"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: name}},
		}}, "v", n)}, nil
	}, nil)
	for i, body := range []string{"2:two", "1:one", "3:three", "3:three-again"} {
		if err := h.Handle(ctx, msg("m", "ev-"+strconv.Itoa(i), body)); err != nil {
			t.Fatalf("event %s: %v", body, err)
		}
	}
	out, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.accounts), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "profile"}}})
	if err != nil {
		t.Fatal(err)
	}
	if testenv.Scalar(out.Item["name"]) != "three" || testenv.Scalar(out.Item["v"]) != "3" {
		t.Fatalf("profile %v, want name three at v 3", out.Item)
	}
	// The stale event was recorded: its redelivery is a duplicate.
	if err := h.Handle(ctx, msg("m", "ev-1", "1:one")); !errors.Is(err, consumer.ErrDuplicate) {
		t.Fatalf("stale event redelivered: %v, want ErrDuplicate", err)
	}
}

func TestTransactionalLimits(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	many := func(n int, size int) dedupedynamo.TxFunc {
		return func(context.Context, *consumer.Message) ([]types.TransactWriteItem, error) {
			var ws []types.TransactWriteItem
			for i := range n {
				ws = append(ws, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(l.accounts), Item: map[string]types.AttributeValue{
					"id": &types.AttributeValueMemberS{Value: strconv.Itoa(i)}, "blob": &types.AttributeValueMemberS{Value: strings.Repeat("x", size)},
				}}})
			}
			return ws, nil
		}
	}
	for name, fn := range map[string]dedupedynamo.TxFunc{"100 writes": many(100, 1), "5 MB": many(20, 256<<10)} {
		err := dedupedynamo.Transactional(l.store, fn, nil).Handle(ctx, msg("m", "big-"+name, "x"))
		var tl *dedupedynamo.TooLargeError
		var pe *consumer.PermanentError
		if !errors.As(err, &tl) || !errors.As(err, &pe) {
			t.Errorf("%s: %v, want a permanent TooLargeError", name, err)
		}
	}
	if err := dedupedynamo.Transactional(l.store, many(99, 1), nil).Handle(ctx, msg("m", "ok-99", "x")); err != nil {
		t.Fatalf("99 writes + the dedupe record: %v", err)
	}
}

func TestTransactionalLeaseModeRecord(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	c, err := l.store.Claim(ctx, "held", dedupe.Fingerprint("dave:1"), time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatal(c, err)
	}
	h := dedupedynamo.Transactional(l.store, l.credit, nil)
	err = h.Handle(ctx, msg("m", "held", "dave:1"))
	var re *consumer.RetryError
	if !errors.As(err, &re) || re.Delay < 59*time.Second {
		t.Fatalf("held key: %v, want RetryAfter ~1m", err)
	}
	l.advance(2 * time.Minute) // the claim's lease has ended
	if err := h.Handle(ctx, msg("m", "held", "dave:1")); err != nil {
		t.Fatalf("after the lease: %v", err)
	}
	if err := l.store.Complete(ctx, "held", c.Token); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("stale claim completed over a committed transaction: %v", err)
	}
}

// TestTransactionalTakeoverChecksFingerprint: a lease-mode claim whose
// owner crashed (its lease ended, its effects unknown) still belongs to
// its message: the same key with another body is key reuse, never a
// takeover; the same body takes over.
func TestTransactionalTakeoverChecksFingerprint(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	if c, err := l.store.Claim(ctx, "abandoned", dedupe.Fingerprint("erin:1"), time.Minute); err != nil || c.Status != dedupe.Claimed {
		t.Fatal(c, err)
	}
	l.advance(2 * time.Minute) // the claim's lease has ended
	h := dedupedynamo.Transactional(l.store, l.credit, nil)
	var kre *dedupe.KeyReuseError
	if err := h.Handle(ctx, msg("m", "abandoned", "erin:999")); !errors.As(err, &kre) {
		t.Fatalf("another body after the lease: %v, want key reuse", err)
	}
	if err := h.Handle(ctx, msg("m", "abandoned", "erin:1")); err != nil {
		t.Fatalf("the same body after the lease: %v", err)
	}
	if b := l.balance(t, "erin"); b != 1 {
		t.Fatalf("balance %d, want 1", b)
	}
}

// TestTransactionalGuardedUserConditionFails: a VersionGuarded write whose
// own condition fails (not enough balance) is a ConditionError: nothing is
// committed, the dedupe record included, and the retry applies it once the
// condition holds. A genuinely older version is still stale: acked, its
// dedupe record committed alone.
func TestTransactionalGuardedUserConditionFails(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	if _, err := l.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.accounts), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "hank"}, "balance": &types.AttributeValueMemberN{Value: "3"}, "v": &types.AttributeValueMemberN{Value: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	// Body "version:amount": debit amount if the balance allows it and the
	// version is newer than the account's.
	debit := dedupedynamo.Transactional(l.store, func(_ context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		v, amount, _ := strings.Cut(m.Body, ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		return []types.TransactWriteItem{dedupedynamo.VersionGuard(types.TransactWriteItem{Update: &types.Update{
			TableName:           aws.String(l.accounts),
			Key:                 map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "hank"}},
			UpdateExpression:    aws.String("SET balance = balance - :amt"),
			ConditionExpression: aws.String("balance >= :amt"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":amt": &types.AttributeValueMemberN{Value: amount},
			},
		}}, "v", n)}, nil
	}, nil)
	account := func() (balance, version string) {
		out, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.accounts), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "hank"}}})
		if err != nil {
			t.Fatal(err)
		}
		return testenv.Scalar(out.Item["balance"]), testenv.Scalar(out.Item["v"])
	}

	// A newer version the balance cannot cover: the user's clause failed.
	err := debit.Handle(ctx, msg("m1", "debit-v2", "2:5"))
	var ce *dedupedynamo.ConditionError
	if !errors.As(err, &ce) || ce.Index != 0 {
		t.Fatalf("guarded write, own condition failed: %v, want a ConditionError on write 0", err)
	}
	if res := consumertest.Process(ctx, debit, msg("m1", "debit-v2", "2:5")); res.Outcome != consumer.OutcomeRetry {
		t.Fatalf("guarded write, own condition failed: outcome %s (%v), want retry", res.Outcome, res.Err)
	}
	if item := testenv.Item(t, l.client, l.dedupe, l.store.PK("debit-v2")); item != nil {
		t.Fatalf("dedupe record committed although the debit was not applied: %v", item)
	}
	if b, v := account(); b != "3" || v != "1" {
		t.Fatalf("account balance %s at v %s, want 3 at v 1", b, v)
	}

	// An older version is stale whatever its own clause says: acked and
	// recorded, nothing applied.
	if err := debit.Handle(ctx, msg("m0", "debit-v1", "1:1")); err != nil {
		t.Fatalf("stale version: %v, want acked", err)
	}
	if item := testenv.Item(t, l.client, l.dedupe, l.store.PK("debit-v1")); testenv.Scalar(item["status"]) != dedupe.StatusCompleted {
		t.Fatalf("stale version not recorded: %v", item)
	}
	if b, v := account(); b != "3" || v != "1" {
		t.Fatalf("stale version applied: balance %s at v %s, want 3 at v 1", b, v)
	}

	// Funded, the retry of version 2 applies once.
	if _, err := l.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(l.accounts),
		Key:              map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "hank"}},
		UpdateExpression: aws.String("ADD balance :a"), ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: "10"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := debit.Handle(ctx, msg("m1", "debit-v2", "2:5")); err != nil {
		t.Fatalf("retry after funding: %v", err)
	}
	if err := debit.Handle(ctx, msg("m1", "debit-v2", "2:5")); !errors.Is(err, consumer.ErrDuplicate) {
		t.Fatalf("redelivery: %v, want ErrDuplicate", err)
	}
	if b, v := account(); b != "8" || v != "2" {
		t.Fatalf("account balance %s at v %s, want 8 at v 2", b, v)
	}
}
