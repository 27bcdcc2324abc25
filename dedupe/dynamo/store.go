package dynamo

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
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/dedupe"
)

// DefaultTable is the table name used when Config.Table is empty.
const DefaultTable = "sqsonce-dedupe"

// Attribute names of a dedupe record.
const (
	AttrPK          = "pk"          // S: "<namespace>#<key>" (see dedupe.PK)
	AttrStatus      = "status"      // S: IN_PROGRESS or COMPLETED
	AttrLeaseUntil  = "lease_until" // N: ms since the epoch
	AttrToken       = "token"       // S: random per claim
	AttrFingerprint = "fingerprint" // S: hash of the body
	AttrExpiresAt   = "expires_at"  // N: s since the epoch; the TTL attribute
)

// Config configures a [Store].
type Config struct {
	// Client is the DynamoDB client. Required.
	Client API
	// Table is the dedupe table (see [CreateTable]). Defaults to
	// "sqsonce-dedupe".
	Table string
	// Namespace prefixes every key: use one per consumer (the queue name is
	// a good choice), so queues fed the same ids dedupe separately.
	// Required.
	Namespace string
	// TTL is how long a record lives after its last write (its
	// expires_at). Defaults to dedupe.DefaultTTL (30 days): longer than a
	// message's 14-day maximum retention plus a redrive's fresh 14 days.
	TTL time.Duration
	// NowFunc is the clock used for leases and expiry. Defaults to
	// time.Now.
	NowFunc func() time.Time
	// Logger receives warnings. Defaults to zap.NewNop().
	Logger *zap.Logger
}

// Store is the DynamoDB [dedupe.Store]: one item per key, claimed with a
// conditional PutItem and fenced by the claim's token.
type Store struct {
	client API
	table  string
	ns     string
	ttl    time.Duration
	now    func() time.Time
	log    *zap.Logger
}

var _ dedupe.Store = (*Store)(nil)

// New returns a Store. It makes no call; run [Store.Check] at start-up.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("dynamo: Config.Client is required")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("dynamo: Config.Namespace is required (one per consumer, e.g. the queue name)")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("dynamo: Config.TTL %s is negative", cfg.TTL)
	}
	s := &Store{
		client: cfg.Client,
		table:  cmp.Or(cfg.Table, DefaultTable),
		ns:     cfg.Namespace,
		ttl:    cmp.Or(cfg.TTL, dedupe.DefaultTTL),
		now:    cfg.NowFunc,
		log:    cfg.Logger,
	}
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

// PK returns the stored partition key of a message key.
func (s *Store) PK(key string) string { return dedupe.PK(s.ns, key) }

// Check verifies at start-up that the table exists with the key schema
// sqsonce needs, with an error that says what to fix. A table without TTL
// on expires_at is only logged (records then stay forever).
func (s *Store) Check(ctx context.Context) error {
	if err := checkTable(ctx, s.client, s.table); err != nil {
		return err
	}
	out, err := s.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)})
	if err == nil && (out.TimeToLiveDescription == nil || out.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled ||
		aws.ToString(out.TimeToLiveDescription.AttributeName) != AttrExpiresAt) {
		s.log.Warn("dynamo: TTL is not enabled on expires_at: dedupe records will never be deleted (run dynamo.CreateTable or enable TTL)",
			zap.String("table", s.table))
	}
	return nil
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// claimCondition admits a claim when there is no live record: none, an
// expired one (TTL deletion lags up to 48 hours), or an IN_PROGRESS one
// whose lease has ended.
const claimCondition = "attribute_not_exists(#pk) OR #exp < :now OR (#st = :in_progress AND #lu < :now_ms)"

// Claim implements [dedupe.Store] with one conditional PutItem; on
// conflict the old item comes back with the error (no extra read).
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (dedupe.Claim, error) {
	pk := s.PK(key)
	for attempt := 0; ; attempt++ {
		now := s.now()
		token := dedupe.NewToken()
		until := now.Add(lease)
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(s.table),
			Item: map[string]types.AttributeValue{
				AttrPK:          str(pk),
				AttrStatus:      str(dedupe.StatusInProgress),
				AttrLeaseUntil:  num(until.UnixMilli()),
				AttrToken:       str(token),
				AttrFingerprint: str(fingerprint),
				AttrExpiresAt:   num(now.Add(s.ttl).Unix()),
			},
			ConditionExpression:      aws.String(claimCondition),
			ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#exp": AttrExpiresAt, "#st": AttrStatus, "#lu": AttrLeaseUntil},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":now":         num(now.Unix()),
				":now_ms":      num(now.UnixMilli()),
				":in_progress": str(dedupe.StatusInProgress),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return dedupe.Claim{Status: dedupe.Claimed, Token: token, LeaseUntil: until}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return dedupe.Claim{}, fmt.Errorf("dynamo: claim: %w", err)
		}
		old := parseRecord(ccf.Item)
		if old.token == token && old.status == dedupe.StatusInProgress {
			// Our own write: the SDK retried a PutItem that had been
			// applied but whose answer was lost (a reset, a timeout).
			return dedupe.Claim{Status: dedupe.Claimed, Token: token, LeaseUntil: until}, nil
		}
		c, live := old.conflict(fingerprint, now)
		if live || attempt >= 2 {
			return c, nil
		}
		// The returned item is dead by our own clock (expired, or an ended
		// lease): the server and we disagree on the boundary; claim again.
	}
}

// record is a dedupe item as read back.
type record struct {
	status      string
	token       string
	fingerprint string
	leaseUntil  time.Time
	expiresAt   int64 // s
}

func parseRecord(item map[string]types.AttributeValue) record {
	var r record
	getS := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	getN := func(name string) int64 {
		if v, ok := item[name].(*types.AttributeValueMemberN); ok {
			n, _ := strconv.ParseInt(v.Value, 10, 64)
			return n
		}
		return 0
	}
	r.status = getS(AttrStatus)
	r.token = getS(AttrToken)
	r.fingerprint = getS(AttrFingerprint)
	if ms := getN(AttrLeaseUntil); ms != 0 {
		r.leaseUntil = time.UnixMilli(ms)
	}
	r.expiresAt = getN(AttrExpiresAt)
	return r
}

// conflict turns the record that blocked a claim into the claim's answer.
// live=false means the record is dead by the client's clock (checked here
// too: expiry is never trusted to the server's TTL deletion alone).
func (r record) conflict(fingerprint string, now time.Time) (c dedupe.Claim, live bool) {
	if r.status == "" || r.expiresAt < now.Unix() || (r.status == dedupe.StatusInProgress && r.leaseUntil.Before(now)) {
		return dedupe.Claim{Status: dedupe.InProgress, LeaseUntil: now}, false
	}
	c.Fingerprint = r.fingerprint
	switch {
	case r.fingerprint != "" && fingerprint != "" && r.fingerprint != fingerprint:
		c.Status = dedupe.KeyReused
	case r.status == dedupe.StatusCompleted:
		c.Status = dedupe.Duplicate
	default:
		c.Status = dedupe.InProgress
		c.LeaseUntil = r.leaseUntil
	}
	return c, true
}

// ownedCondition fences Extend, Complete and Release by the claim token.
const ownedCondition = "#tk = :tk AND #st = :in_progress"

func ownedValues(token string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{":tk": str(token), ":in_progress": str(dedupe.StatusInProgress)}
}

func (s *Store) key(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: str(s.PK(key))}
}

// fenced maps a failed fenced write to ErrNotOwner.
func fenced(op string, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamo: %s: %w", op, dedupe.ErrNotOwner)
	}
	return fmt.Errorf("dynamo: %s: %w", op, err)
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	now := s.now()
	vals := ownedValues(token)
	vals[":lu"] = num(now.Add(lease).UnixMilli())
	vals[":exp"] = num(now.Add(s.ttl).Unix())
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(key),
		UpdateExpression:          aws.String("SET #lu = :lu, #exp = :exp"),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#lu": AttrLeaseUntil, "#exp": AttrExpiresAt},
		ExpressionAttributeValues: vals,
	})
	if err != nil {
		return fenced("extend", err)
	}
	return nil
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, key, token string) error {
	vals := ownedValues(token)
	vals[":completed"] = str(dedupe.StatusCompleted)
	vals[":exp"] = num(s.now().Add(s.ttl).Unix())
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(key),
		UpdateExpression:          aws.String("SET #st = :completed, #exp = :exp REMOVE #lu"),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#lu": AttrLeaseUntil, "#exp": AttrExpiresAt},
		ExpressionAttributeValues: vals,
		// The old item tells a retried Complete that had been applied
		// (same token, COMPLETED) from a lost claim.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if old := parseRecord(ccf.Item); old.token == token && old.status == dedupe.StatusCompleted {
			return nil
		}
	}
	if err != nil {
		return fenced("complete", err)
	}
	return nil
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, key, token string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(key),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  map[string]string{"#tk": AttrToken, "#st": AttrStatus},
		ExpressionAttributeValues: ownedValues(token),
	})
	if err != nil {
		return fenced("release", err)
	}
	return nil
}
