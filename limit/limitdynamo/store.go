package limitdynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/dynamohttp"
	"github.com/sqsonce/sqsonce/internal/dynamolease"
	"github.com/sqsonce/sqsonce/internal/dynamotable"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/limit"
)

// DefaultTable is the table name used when Config.Table is empty.
const DefaultTable = "sqsonce-limits"

// Attribute names of the limits table's items.
const (
	AttrPK        = "pk"         // S: "rate#<name>" or "slots#<name>#<key>" (hashed past 2048 bytes)
	AttrNext      = "next"       // N: a rate's first slot not leased, ns since the epoch
	AttrHolders   = "holders"    // M: a key's slots, holder → expiry (N, ms since the epoch)
	AttrVersion   = "v"          // N: a key's slots' version, one more at each change
	AttrExpiresAt = "expires_at" // N: s since the epoch; the TTL attribute
)

// idleTTL is how long an item outlives its last use: DynamoDB's TTL then
// deletes the items of names and keys no longer used.
const idleTTL = 24 * time.Hour

// maxTries bounds the conditional writes of one call that lose a race to
// another worker's.
const maxTries = 8

// DynamoDBAPI is the part of the DynamoDB client the store uses: one
// method per call made. *dynamodb.Client implements it.
type DynamoDBAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	dynamotable.API
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// Config configures a [Store].
type Config struct {
	// Client is the DynamoDB client. Required.
	Client DynamoDBAPI
	// Table is the limits table (see [CreateTable]). Defaults to
	// "sqsonce-limits".
	Table string
	// NowFunc is the clock: a rate's slots and a slot's expiry are judged
	// by it, so the workers' clocks must agree (NTP). Defaults to
	// time.Now.
	NowFunc func() time.Time
	// Logger receives warnings. Defaults to zap.NewNop().
	Logger *zap.Logger
}

// Store is the DynamoDB [limit.Store]: one item per rate, one per key of
// a per-key limit.
type Store struct {
	client DynamoDBAPI
	table  string
	now    func() time.Time
	log    *zap.Logger
}

var _ limit.Store = (*Store)(nil)

// New returns a Store. It makes no call; run [Store.Check] at start-up.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("limitdynamo: Config.Client is required")
	}
	s := &Store{client: cfg.Client, table: cmp.Or(cfg.Table, DefaultTable), now: cfg.NowFunc, log: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	return s, nil
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// schema is the limits table's: partition key pk alone, TTL on
// expires_at (the lease-record shape).
var schema = dynamotable.Lease("limitdynamo", "limits table")

// CreateTable creates the limits table if it does not exist: on-demand
// billing, partition key pk (S), TTL enabled on expires_at. It waits until
// the table is ACTIVE and checks the key schema of a table that already
// existed. It is idempotent.
func CreateTable(ctx context.Context, client DynamoDBAPI, table string) error {
	return dynamotable.Create(ctx, client, cmp.Or(table, DefaultTable), schema)
}

// Check verifies at start-up that the table exists with the key schema
// the store needs, with an error that says what to fix. A table without
// TTL on expires_at is only logged (idle items then stay).
func (s *Store) Check(ctx context.Context) error {
	return dynamolease.Check(ctx, s.client, s.table, schema, s.log)
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: str(pk)}
}

func ratePK(name string) string { return leasekey.TextPK("rate", name) }

func slotsPK(s limit.Slot) string { return leasekey.TextPK("slots#"+s.Name, s.Key) }

// conditionFailed reports a failed condition, and the item as it was (nil
// when there was none).
func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

func getN(item map[string]types.AttributeValue, name string) (int64, bool) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	return v, err == nil
}

// Reserve implements [limit.RateStore]: one UpdateItem that adds the block
// to the timeline when it is within [now − Burst, now + Ahead] (the usual
// case: DynamoDB serialises the fleet's additions to the item, none
// conflicts), else one PutItem that restarts an idle timeline at now −
// Burst.
func (s *Store) Reserve(ctx context.Context, name string, req limit.RateRequest) (limit.RateLease, error) {
	if err := req.Check(); err != nil {
		return limit.RateLease{}, fmt.Errorf("limitdynamo: %w", err)
	}
	pk := ratePK(name)
	d := time.Duration(req.N) * req.Every
	for range maxTries {
		now := s.now()
		floor, last := now.Add(-req.Burst).UnixNano(), now.Add(req.Ahead).UnixNano()
		exp := num(now.Add(req.Ahead + idleTTL).Unix())
		out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.table),
			Key:                                 key(pk),
			UpdateExpression:                    aws.String("SET #next = #next + :d, #exp = :exp"),
			ConditionExpression:                 aws.String("#next BETWEEN :floor AND :last"),
			ExpressionAttributeNames:            map[string]string{"#next": AttrNext, "#exp": AttrExpiresAt},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":d": num(int64(d)), ":exp": exp, ":floor": num(floor), ":last": num(last)},
			ReturnValues:                        types.ReturnValueUpdatedNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, dynamohttp.Guard)
		if err == nil {
			next, ok := getN(out.Attributes, AttrNext)
			if !ok {
				return limit.RateLease{}, fmt.Errorf("limitdynamo: reserve %q: the update returned no %s", name, AttrNext)
			}
			end := time.Unix(0, next)
			return limit.RateLease{From: end.Add(-d), N: req.N, Next: end}, nil
		}
		old, failed := conditionFailed(err)
		if !failed {
			return limit.RateLease{}, fmt.Errorf("limitdynamo: reserve %q in %s: %w", name, s.table, err)
		}
		if next, ok := getN(old, AttrNext); ok && next > last {
			// Leased far enough ahead.
			return limit.RateLease{Next: time.Unix(0, next)}, nil
		}
		// New, or idle since before now − Burst: restart at now − Burst,
		// unless another worker did first.
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 aws.String(s.table),
			Item:                      map[string]types.AttributeValue{AttrPK: str(pk), AttrNext: num(floor + int64(d)), AttrExpiresAt: exp},
			ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #next < :floor"),
			ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#next": AttrNext},
			ExpressionAttributeValues: map[string]types.AttributeValue{":floor": num(floor)},
		}, dynamohttp.Guard)
		if err == nil {
			from := time.Unix(0, floor)
			return limit.RateLease{From: from, N: req.N, Next: from.Add(d)}, nil
		}
		if _, failed := conditionFailed(err); !failed {
			return limit.RateLease{}, fmt.Errorf("limitdynamo: reserve %q in %s: %w", name, s.table, err)
		}
	}
	return limit.RateLease{}, fmt.Errorf("limitdynamo: reserve %q in %s: lost the race to other workers %d times", name, s.table, maxTries)
}

// Acquire implements [limit.SlotStore]. A key's slots are one item: a map
// of holder → expiry, and a version. The first try is one UpdateItem that
// adds the holder while the map has fewer than limit entries; when it has
// not, and some have expired, one more removes them and adds the holder,
// on the version read.
func (s *Store) Acquire(ctx context.Context, sl limit.Slot, limitN int, ttl time.Duration) (bool, error) {
	if err := sl.Check(limitN); err != nil {
		return false, fmt.Errorf("limitdynamo: %w", err)
	}
	pk := slotsPK(sl)
	for range maxTries {
		now := s.now()
		until := num(now.Add(ttl).UnixMilli())
		exp := num(now.Add(ttl + idleTTL).Unix())
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.table),
			Key:                                 key(pk),
			UpdateExpression:                    aws.String("SET #h.#me = :until, #exp = :exp ADD #v :one"),
			ConditionExpression:                 aws.String("size(#h) < :limit"),
			ExpressionAttributeNames:            map[string]string{"#h": AttrHolders, "#me": sl.Holder, "#exp": AttrExpiresAt, "#v": AttrVersion},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":until": until, ":exp": exp, ":one": num(1), ":limit": num(int64(limitN))},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, dynamohttp.Guard)
		if err == nil {
			return true, nil
		}
		old, failed := conditionFailed(err)
		if !failed && !isValidation(err) {
			return false, fmt.Errorf("limitdynamo: acquire a slot in %s: %w", s.table, err)
		}
		holders, _ := old[AttrHolders].(*types.AttributeValueMemberM)
		if !failed || holders == nil {
			// No item yet (or one without the map): create it with this
			// holder, unless another worker did first.
			_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(s.table),
				Item: map[string]types.AttributeValue{
					AttrPK: str(pk), AttrHolders: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{sl.Holder: until}},
					AttrVersion: num(1), AttrExpiresAt: exp,
				},
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
			}, dynamohttp.Guard)
			if err == nil {
				return true, nil
			}
			if _, failed := conditionFailed(err); !failed {
				return false, fmt.Errorf("limitdynamo: acquire a slot in %s: %w", s.table, err)
			}
			continue
		}
		// Full by count: are some of them expired?
		nowMs := now.UnixMilli()
		var expired []string
		for h, v := range holders.Value {
			n, ok := v.(*types.AttributeValueMemberN)
			if !ok {
				expired = append(expired, h) // not ours to read: clear it
				continue
			}
			if ms, err := strconv.ParseInt(n.Value, 10, 64); err != nil || ms <= nowMs {
				expired = append(expired, h)
			}
		}
		if len(holders.Value)-len(expired) >= limitN {
			return false, nil
		}
		version, _ := getN(old, AttrVersion)
		names := map[string]string{"#h": AttrHolders, "#me": sl.Holder, "#exp": AttrExpiresAt, "#v": AttrVersion}
		remove := ""
		for i, h := range expired {
			n := "#x" + strconv.Itoa(i)
			names[n] = h
			if i > 0 {
				remove += ", "
			}
			remove += "#h." + n
		}
		_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       key(pk),
			UpdateExpression:          aws.String("SET #h.#me = :until, #exp = :exp, #v = :next REMOVE " + remove),
			ConditionExpression:       aws.String("#v = :v"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: map[string]types.AttributeValue{":until": until, ":exp": exp, ":v": num(version), ":next": num(version + 1)},
		}, dynamohttp.Guard)
		if err == nil {
			return true, nil
		}
		if _, failed := conditionFailed(err); !failed {
			return false, fmt.Errorf("limitdynamo: acquire a slot in %s: %w", s.table, err)
		}
	}
	return false, fmt.Errorf("limitdynamo: acquire a slot in %s: lost the race to other workers %d times", s.table, maxTries)
}

// Extend implements [limit.SlotStore]: one UpdateItem on the holder's
// entry, which must still be there.
func (s *Store) Extend(ctx context.Context, sl limit.Slot, ttl time.Duration) error {
	now := s.now()
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(slotsPK(sl)),
		UpdateExpression:          aws.String("SET #h.#me = :until, #exp = :exp"),
		ConditionExpression:       aws.String("attribute_exists(#h.#me)"),
		ExpressionAttributeNames:  map[string]string{"#h": AttrHolders, "#me": sl.Holder, "#exp": AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":until": num(now.Add(ttl).UnixMilli()), ":exp": num(now.Add(ttl + idleTTL).Unix())},
	}, dynamohttp.Guard)
	if _, failed := conditionFailed(err); failed {
		return fmt.Errorf("limitdynamo: extend a slot: %w", limit.ErrLost)
	}
	if err != nil {
		return fmt.Errorf("limitdynamo: extend a slot in %s: %w", s.table, err)
	}
	return nil
}

// Release implements [limit.SlotStore]: one UpdateItem that removes the
// holder's entry.
func (s *Store) Release(ctx context.Context, sl limit.Slot) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(slotsPK(sl)),
		UpdateExpression:          aws.String("REMOVE #h.#me ADD #v :one"),
		ConditionExpression:       aws.String("attribute_exists(#h.#me)"),
		ExpressionAttributeNames:  map[string]string{"#h": AttrHolders, "#me": sl.Holder, "#v": AttrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
	}, dynamohttp.Guard)
	if _, failed := conditionFailed(err); failed {
		return nil // not held: released already, or expired and taken
	}
	if err != nil {
		return fmt.Errorf("limitdynamo: release a slot in %s: %w", s.table, err)
	}
	return nil
}

// isValidation reports a request DynamoDB rejected as invalid: a document
// path into a map the item does not have yet.
func isValidation(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}
