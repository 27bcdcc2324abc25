package dedupedynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/dynamolease"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/step"
)

// DefaultTable is the table name used when Config.Table is empty.
const DefaultTable = "sqsonce-dedupe"

// Attribute names of a dedupe record.
const (
	AttrPK          = "pk"           // S: "<namespace>#<key>" (hashed past 2048 bytes)
	AttrStatus      = "status"       // S: IN_PROGRESS or COMPLETED
	AttrLeaseUntil  = "lease_until"  // N: ms since the epoch
	AttrToken       = "token"        // S: random per claim
	AttrFingerprint = "fingerprint"  // S: hash of the body
	AttrExpiresAt   = "expires_at"   // N: s since the epoch; the TTL attribute
	AttrSteps       = "steps"        // M: the handler's steps (package step), when it records any
	AttrUnknownStep = "unknown_step" // S: a step whose outcome is unknown, absent when none
)

// Config configures a [Store].
type Config struct {
	// Client is the DynamoDB client. Required.
	Client DynamoDBAPI
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
	client DynamoDBAPI
	table  string
	ns     string
	ttl    time.Duration
	now    func() time.Time
	log    *zap.Logger
}

var _ dedupe.StepStore = (*Store)(nil)

// New returns a Store. It makes no call; run [Store.Check] at start-up.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("dedupedynamo: Config.Client is required")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("dedupedynamo: Config.Namespace is required (one per consumer, e.g. the queue name)")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("dedupedynamo: Config.TTL %s is negative", cfg.TTL)
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
func (s *Store) PK(key string) string { return leasekey.PK(s.ns, key) }

// Check verifies at start-up that the table exists with the key schema
// sqsonce needs, with an error that says what to fix. A table without TTL
// on expires_at is only logged (records then stay forever).
func (s *Store) Check(ctx context.Context) error {
	return dynamolease.Check(ctx, s.client, s.table, schema, s.log)
}

func num(n int64) types.AttributeValue  { return dynamolease.Num(n) }
func str(s string) types.AttributeValue { return dynamolease.Str(s) }

// lease is the store's view of its table for the shared record code.
func (s *Store) lease() *dynamolease.Table {
	return &dynamolease.Table{
		Client: s.client, Name: s.table, TTL: s.ttl, Now: s.now,
		LenientFingerprint: true, ErrNotOwner: dedupe.ErrNotOwner, Prefix: "dedupedynamo",
	}
}

// claimOf maps the shared record code's answer to a dedupe.Claim.
func claimOf(r dynamolease.Result) dedupe.Claim {
	c := dedupe.Claim{Token: r.Token, LeaseUntil: r.LeaseUntil, Fingerprint: r.Fingerprint, Steps: r.Steps}
	switch r.Outcome {
	case dynamolease.Claimed:
		c.Status = dedupe.Claimed
	case dynamolease.Completed:
		c.Status = dedupe.Duplicate
	case dynamolease.KeyReused:
		c.Status = dedupe.KeyReused
	default:
		c.Status = dedupe.InProgress
	}
	return c
}

// Claim implements [dedupe.Store] with one conditional PutItem; on
// conflict the old item comes back with the error (no extra read).
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (dedupe.Claim, error) {
	r, err := s.lease().Claim(ctx, s.PK(key), fingerprint, lease)
	if err != nil {
		return dedupe.Claim{}, err
	}
	return claimOf(r), nil
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	return s.lease().Extend(ctx, s.PK(key), token, lease)
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, key, token string) error {
	l := s.lease()
	return l.Complete(ctx, token, l.CompleteUpdate(s.PK(key), token, "", nil, nil))
}

// Release implements [dedupe.Store].
func (s *Store) Release(ctx context.Context, key, token string) error {
	return s.lease().Release(ctx, s.PK(key), token)
}

// SaveSteps implements [dedupe.StepStore] with one conditional UpdateItem
// (the steps are written whole).
func (s *Store) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	return s.lease().SaveSteps(ctx, s.PK(key), token, steps)
}

// Unknown implements [dedupe.StepStore] with a Scan of the table (paged,
// filtered on unknown_step and the namespace): an operator's call. The
// client must have Scan (*dynamodb.Client does) and the role
// dynamodb:Scan.
func (s *Store) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	return s.lease().Unknown(ctx, s.ns, limit)
}

// Resolve implements [dedupe.StepStore]: a strongly consistent GetItem,
// then an UpdateItem conditioned on the record's token and ended lease.
func (s *Store) Resolve(ctx context.Context, key, name string, applied bool) error {
	return s.lease().Resolve(ctx, s.PK(key), name, applied)
}
