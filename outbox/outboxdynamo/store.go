package outboxdynamo

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/internal/dynamohttp"
	"github.com/sqsonce/sqsonce/internal/partlease"
	"github.com/sqsonce/sqsonce/outbox"
)

// DynamoDBAPI is the part of the DynamoDB client the outbox uses.
// *dynamodb.Client implements it. The Store calls it from several
// goroutines at once.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Item attribute names; see docs/architecture.md for the item kinds.
const (
	attrPK, attrSK = "pk", "sk"
	attrExpiresAt  = "expires_at"
)

// DefaultTable is the table used when Config.Table is empty.
const DefaultTable = "sqsonce-outbox"

// Config configures a Store.
type Config struct {
	// Client talks to DynamoDB. Required.
	Client DynamoDBAPI
	// Table is the outbox table, made by [CreateTable]. Defaults to
	// "sqsonce-outbox".
	Table string
	// Partitions spread entities over relays. Every writer and relay of a
	// table must use the same number; change it only with the outbox
	// empty. Defaults to 16.
	Partitions int
	// Lease is how long a relay holds its partitions without renewing
	// them: the time another relay waits to take over after a crash.
	// Defaults to 10s.
	Lease time.Duration
	// HeadTTL is how long an entity's order record lives after its last
	// event. Defaults to 30 days.
	HeadTTL time.Duration
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Store is the DynamoDB outbox: [Store.Put] is the writer, and the Store
// is the [outbox.Store] a relay reads.
type Store struct {
	cfg Config

	mu   sync.Mutex
	last int64 // the largest order stamp this process wrote or saw

	leases partlease.Cache // owner → partitions held

	aheadMu sync.Mutex
	ahead   map[int]*ahead   // by partition: what its pass read and kept (ahead.go)
	wrote   map[int]uint64   // by partition: how many of its events failed (ahead.go)
	gone    map[int]*goneLog // by partition: its events removed lately (ahead.go)

	leavingMu sync.Mutex
	leaving   map[string][]int // owner → partitions to give up at its next Due
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("outboxdynamo: Config.Client is required")
	}
	if cfg.Partitions < 0 || cfg.Partitions > 1000 || cfg.Lease < 0 || cfg.HeadTTL < 0 {
		return nil, errors.New("outboxdynamo: Partitions must be between 1 and 1000, durations not negative")
	}
	cfg.Table = cmp.Or(cfg.Table, DefaultTable)
	cfg.Partitions = cmp.Or(cfg.Partitions, 16)
	cfg.Lease = cmp.Or(cfg.Lease, 10*time.Second)
	cfg.HeadTTL = cmp.Or(cfg.HeadTTL, 30*24*time.Hour)
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Store{cfg: cfg}, nil
}

// Table returns the table name.
func (st *Store) Table() string { return st.cfg.Table }

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func entityKey(entity string) string {
	if len(entity) <= 1000 {
		return entity
	}
	sum := sha256.Sum256([]byte(entity))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func entityHash(entity string) string {
	sum := sha256.Sum256([]byte(entity))
	return hex.EncodeToString(sum[:8])
}

func partitionPK(p int) string { return fmt.Sprintf("b#%04d", p) }

// stamp returns the next order stamp: microseconds since the epoch, and
// always above any stamp this process wrote or saw.
func (st *Store) stamp(now time.Time) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.last = max(now.UnixMicro(), st.last+1)
	return st.last
}

func (st *Store) saw(stamp int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.last = max(st.last, stamp)
}

// Put returns the writes that store evs: put them in the same
// TransactWriteItems as the change they describe (at most 100 writes in
// all). For each entity it adds one more write, to the entity's order
// record: conditional on the record's stamp being below the entity's first
// stamp in this transaction (no event of that entity stamped at or after
// any of this transaction's events has committed first), it sets the
// record to the entity's last stamp. That is what makes the relay publish
// each entity's events in commit order, never one transaction's events
// interleaved with another's. When that condition fails the transaction is cancelled:
// [Store.IsOrderConflict] says so, and a new Put (and transaction)
// succeeds. [Store.Commit] does that loop for you.
func (st *Store) Put(evs ...outbox.Event) ([]types.TransactWriteItem, error) {
	now := st.cfg.NowFunc()
	var items []types.TransactWriteItem
	firstOf, lastOf := map[string]int64{}, map[string]int64{}
	var order []string
	for i := range evs {
		ev := evs[i]
		if err := outbox.Prepare(&ev, now); err != nil {
			return nil, err
		}
		ts := st.stamp(now)
		if _, ok := firstOf[ev.Entity]; !ok {
			order = append(order, ev.Entity)
			firstOf[ev.Entity] = ts
		}
		lastOf[ev.Entity] = ts
		item := map[string]types.AttributeValue{
			attrPK:    s(partitionPK(outbox.Partition(ev.Entity, st.cfg.Partitions))),
			attrSK:    s(fmt.Sprintf("%s#%020d#%s", entityHash(ev.Entity), ts, ev.ID)),
			"id":      s(ev.ID),
			"entity":  s(ev.Entity),
			"payload": s(ev.Payload),
			"created": n(ev.CreatedAt.UnixMilli()),
			"stamp":   n(ts),
		}
		if ev.Type != "" {
			item["type"] = s(ev.Type)
		}
		if !ev.NotBefore.IsZero() {
			item["not_before"] = n(ev.NotBefore.UnixMilli())
		}
		if len(ev.Trace) > 0 {
			tr := map[string]types.AttributeValue{}
			for k, v := range ev.Trace {
				tr[k] = s(v)
			}
			item["trace"] = &types.AttributeValueMemberM{Value: tr}
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           aws.String(st.cfg.Table),
			Item:                item,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	exp := now.Add(st.cfg.HeadTTL).Unix()
	for _, entity := range order {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                           aws.String(st.cfg.Table),
			Key:                                 map[string]types.AttributeValue{attrPK: s("h#" + entityKey(entity)), attrSK: s("h")},
			UpdateExpression:                    aws.String("SET stamp = :last, expires_at = :exp"),
			ConditionExpression:                 aws.String("attribute_not_exists(stamp) OR stamp < :first"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":first": n(firstOf[entity]), ":last": n(lastOf[entity]), ":exp": n(exp)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	return items, nil
}

// IsOrderConflict reports whether err cancelled a transaction because
// another writer had committed a later event of the same entity first. The
// next [Store.Put] then stamps its events after that one.
func (st *Store) IsOrderConflict(err error) bool {
	var can *types.TransactionCanceledException
	if !errors.As(err, &can) {
		return false
	}
	conflict := false
	for _, r := range can.CancellationReasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" || r.Item == nil {
			continue
		}
		pk, _ := r.Item[attrPK].(*types.AttributeValueMemberS)
		if pk == nil || !strings.HasPrefix(pk.Value, "h#") {
			continue
		}
		if v, ok := r.Item["stamp"].(*types.AttributeValueMemberN); ok {
			if ts, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
				st.saw(ts)
			}
		}
		conflict = true
	}
	return conflict
}

// Commit runs build and commits what it returns in one TransactWriteItems.
// build is called again, up to 5 times in all, after an order conflict or
// a transaction conflict, so it must build its writes afresh (calling
// [Store.Put] each time).
func (st *Store) Commit(ctx context.Context, build func() ([]types.TransactWriteItem, error)) error {
	var err error
	for range 5 {
		var items []types.TransactWriteItem
		if items, err = build(); err != nil {
			return err
		}
		_, err = st.cfg.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, dynamohttp.Guard)
		if err == nil {
			return nil
		}
		var tce *types.TransactionConflictException
		if !st.IsOrderConflict(err) && !errors.As(err, &tce) && !conflicted(err) {
			return fmt.Errorf("outboxdynamo: commit: %w", err)
		}
	}
	return fmt.Errorf("outboxdynamo: commit: still conflicting after 5 attempts: %w", err)
}

func conflicted(err error) bool {
	var can *types.TransactionCanceledException
	if !errors.As(err, &can) {
		return false
	}
	for _, r := range can.CancellationReasons {
		if aws.ToString(r.Code) == "TransactionConflict" {
			return true
		}
	}
	return false
}

var _ outbox.RunStore = (*Store)(nil)
