package idemdynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/dynamohttp"
	"github.com/sqsonce/sqsonce/internal/dynamolease"
	"github.com/sqsonce/sqsonce/internal/dynamotable"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/step"
)

// Defaults.
const (
	// DefaultTable is the table used when Config.Table is empty.
	DefaultTable = "sqsonce-idempotency"
	// DefaultNamespace is the key namespace used when Config.Namespace is
	// empty.
	DefaultNamespace = "idempotency"
	// MaxTransactItems is the most writes one TransactWriteItems takes, the
	// key record included.
	MaxTransactItems = 100
)

// Attribute names of a key record: those of a dedupe record, plus the
// stored response.
const (
	AttrPK              = "pk"                    // S: "<namespace>#<record key>"
	AttrStatus          = "status"                // S: IN_PROGRESS or COMPLETED
	AttrLeaseUntil      = "lease_until"           // N: ms since the epoch
	AttrToken           = "token"                 // S: random per claim
	AttrFingerprint     = "fingerprint"           // S: hash of the request
	AttrExpiresAt       = "expires_at"            // N: s since the epoch; the TTL attribute
	AttrResponseStatus  = "response_status"       // N: the stored status
	AttrResponseHeaders = "response_headers"      // M: header name → L of S
	AttrResponseBody    = "response_body"         // B: the stored body (absent when empty)
	AttrNotRetained     = "response_not_retained" // BOOL: true when the response was not retained (no body)
	AttrSteps           = "steps"                 // M: the handler's steps (package step), when it records any
	AttrUnknownStep     = "unknown_step"          // S: a step whose outcome is unknown, absent when none
)

// DynamoDBAPI is the part of the DynamoDB client the store uses: one
// method per call made. *dynamodb.Client implements it, and so does any
// dedupedynamo.DynamoDBAPI, so one client value serves both stores.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// schema is the key table's: the lease-record table the dedupe store
// uses too.
var schema = dynamotable.Lease("idemdynamo", "idempotency table")

// Config configures a [Store].
type Config struct {
	// Client is the DynamoDB client. Required.
	Client DynamoDBAPI
	// Table is the table (see [CreateTable]); it may be the dedupe table.
	// Defaults to "sqsonce-idempotency".
	Table string
	// Namespace prefixes every key: use one per API when several share a
	// table. Defaults to "idempotency".
	Namespace string
	// TTL is how long a record lives after its last write (its
	// expires_at); a retry after that runs again. Defaults to
	// idempotency.DefaultTTL (24 hours).
	TTL time.Duration
	// ConflictRetries is how many times a completion cancelled by a
	// TransactionConflict is resubmitted (after a short jittered pause)
	// before it fails. Defaults to 3.
	ConflictRetries int
	// NowFunc is the clock used for leases and expiry. Defaults to
	// time.Now.
	NowFunc func() time.Time
	// Logger receives warnings. Defaults to zap.NewNop().
	Logger *zap.Logger
}

// Store is the DynamoDB [idempotency.Store]: one item per key, claimed with
// a conditional PutItem, fenced by the claim's token, completed with the
// response (and the handler's writes) in one write.
type Store struct {
	client    DynamoDBAPI
	table     string
	ns        string
	ttl       time.Duration
	conflicts int
	now       func() time.Time
	log       *zap.Logger
	records   *dynamolease.Table // the table for the shared record code, made once
}

var _ idempotency.Store = (*Store)(nil)

// New returns a Store. It makes no call; run [Store.Check] at start-up.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("idemdynamo: Config.Client is required")
	}
	if cfg.TTL < 0 || cfg.ConflictRetries < 0 {
		return nil, errors.New("idemdynamo: Config.TTL and ConflictRetries must not be negative")
	}
	s := &Store{
		client:    cfg.Client,
		table:     cmp.Or(cfg.Table, DefaultTable),
		ns:        cmp.Or(cfg.Namespace, DefaultNamespace),
		ttl:       cmp.Or(cfg.TTL, idempotency.DefaultTTL),
		conflicts: cmp.Or(cfg.ConflictRetries, 3),
		now:       cfg.NowFunc,
		log:       cfg.Logger,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.records = &dynamolease.Table{Client: s.client, Name: s.table, TTL: s.ttl, Now: s.now, ErrNotOwner: idempotency.ErrNotOwner, Prefix: "idemdynamo"}
	return s, nil
}

// CreateTable creates the table if it does not exist: on-demand billing,
// partition key pk (S), TTL on expires_at: the dedupe table's schema, so
// one table can hold both. It waits until the table is ACTIVE and is
// idempotent.
func CreateTable(ctx context.Context, client DynamoDBAPI, table string) error {
	return dynamotable.Create(ctx, client, table, schema)
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// PK returns the stored partition key of a record key.
func (s *Store) PK(key string) string { return leasekey.PK(s.ns, key) }

// Check verifies at start-up that the table exists with the key schema
// the store needs, with an error that says what to fix. A table without
// TTL on expires_at is only logged.
func (s *Store) Check(ctx context.Context) error {
	return dynamolease.Check(ctx, s.client, s.table, schema, s.log)
}

func num(n int64) types.AttributeValue  { return dynamolease.Num(n) }
func str(s string) types.AttributeValue { return dynamolease.Str(s) }

// lease is the store's view of its table for the shared record code.
func (s *Store) lease() *dynamolease.Table { return s.records }

// Claim implements [idempotency.Store] with one conditional PutItem; on
// conflict the old item, stored response included, comes back with the
// error (no extra read).
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (idempotency.Claim, error) {
	r, err := s.lease().Claim(ctx, s.PK(key), fingerprint, lease)
	if err != nil {
		return idempotency.Claim{}, err
	}
	c := idempotency.Claim{Token: r.Token, LeaseUntil: r.LeaseUntil, Fingerprint: r.Fingerprint, Steps: r.Steps}
	switch r.Outcome {
	case dynamolease.Claimed:
		c.Status = idempotency.Claimed
	case dynamolease.Completed:
		c.Status = idempotency.Completed
		resp := parseResponse(r.Item)
		c.Response = &resp
	case dynamolease.KeyReused:
		c.Status = idempotency.KeyReused
	default:
		c.Status = idempotency.InProgress
	}
	return c, nil
}

// parseResponse reads the stored response of a COMPLETED record.
func parseResponse(item map[string]types.AttributeValue) idempotency.Response {
	resp := idempotency.Response{Status: int(dynamolease.GetN(item, AttrResponseStatus))}
	if v, ok := item[AttrResponseBody].(*types.AttributeValueMemberB); ok {
		resp.Body = v.Value
	}
	if v, ok := item[AttrNotRetained].(*types.AttributeValueMemberBOOL); ok {
		resp.NotRetained = v.Value
	}
	if m, ok := item[AttrResponseHeaders].(*types.AttributeValueMemberM); ok {
		resp.Header = http.Header{}
		for name, v := range m.Value {
			l, ok := v.(*types.AttributeValueMemberL)
			if !ok {
				continue
			}
			for _, e := range l.Value {
				if s, ok := e.(*types.AttributeValueMemberS); ok {
					resp.Header[name] = append(resp.Header[name], s.Value)
				}
			}
		}
	}
	return resp
}

// Extend implements [idempotency.Store].
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	return s.lease().Extend(ctx, s.PK(key), token, lease)
}

// completeUpdate is the fenced update that marks the record COMPLETED
// with resp.
func (s *Store) completeUpdate(key, token string, resp idempotency.Response) *types.Update {
	headers := map[string]types.AttributeValue{}
	for name, vs := range resp.Header {
		l := make([]types.AttributeValue, len(vs))
		for i, v := range vs {
			l[i] = str(v)
		}
		headers[name] = &types.AttributeValueMemberL{Value: l}
	}
	vals := map[string]types.AttributeValue{":rs": num(int64(resp.Status)), ":rh": &types.AttributeValueMemberM{Value: headers}}
	names := map[string]string{"#rs": AttrResponseStatus, "#rh": AttrResponseHeaders}
	set := ", #rs = :rs, #rh = :rh"
	if len(resp.Body) > 0 {
		vals[":rb"] = &types.AttributeValueMemberB{Value: resp.Body}
		names["#rb"] = AttrResponseBody
		set += ", #rb = :rb"
	}
	if resp.NotRetained {
		vals[":nr"] = &types.AttributeValueMemberBOOL{Value: true}
		names["#nr"] = AttrNotRetained
		set += ", #nr = :nr"
	}
	return s.lease().CompleteUpdate(s.PK(key), token, set, names, vals)
}

// MaxItemBytes is DynamoDB's item size limit (400 KB). A response that
// would make the record larger is refused with idempotency.ErrTooLarge.
const MaxItemBytes = 400 << 10

// recordSize estimates the completed record's size the way DynamoDB counts
// it (attribute names plus values), with room for the fixed attributes.
func (s *Store) recordSize(key string, resp idempotency.Response) int {
	const fixed = 256 // status, token, fingerprint, expires_at, lease_until and their names
	n := fixed + len(AttrPK) + len(s.PK(key)) + len(AttrResponseStatus) + 8 +
		len(AttrResponseHeaders) + 3 + len(AttrResponseBody) + len(resp.Body)
	for name, vs := range resp.Header {
		n += len(name) + 4
		for _, v := range vs {
			n += len(v) + 1
		}
	}
	return n
}

// Complete implements [idempotency.Store]. Without writes ([Transact],
// [TransactFunc]) it is one conditional UpdateItem; with writes, one
// TransactWriteItems holding the writes and that update, so they commit
// together or not at all. A cancelled transaction is tried again with
// freshly built writes when a TransactFunc's retry asks (5 attempts in
// all), and resubmitted after a TransactionConflict
// (Config.ConflictRetries). Work another package attached is refused with
// idempotency.ErrWorkUnsupported.
func (s *Store) Complete(ctx context.Context, key, token string, c idempotency.Completion) error {
	if size := s.recordSize(key, c.Response); size > MaxItemBytes {
		return fmt.Errorf("idemdynamo: complete: record of ~%d bytes, DynamoDB's item limit is %d: %w", size, MaxItemBytes, idempotency.ErrTooLarge)
	}
	w, err := workOf(c.Work)
	if err != nil {
		return err
	}
	if len(w.fixed) == 0 && len(w.builds) == 0 {
		return s.lease().Complete(ctx, token, s.completeUpdate(key, token, c.Response))
	}
	rebuilds := 0
	for conflicts := 0; ; {
		writes, err := w.build()
		if err != nil {
			return fmt.Errorf("idemdynamo: complete: build writes: %w", err)
		}
		if n := len(writes) + 1; n > MaxTransactItems {
			return fmt.Errorf("idemdynamo: complete: %d writes with the key record, DynamoDB takes at most %d in one transaction: %w",
				n, MaxTransactItems, idempotency.ErrPermanent)
		}
		err = s.commit(ctx, key, token, writes, c.Response)
		if err == nil {
			return nil
		}
		var can *types.TransactionCanceledException
		if !errors.As(err, &can) {
			return fmt.Errorf("idemdynamo: complete: transaction: %w", classify(err))
		}
		reasons := can.CancellationReasons
		if len(reasons) != len(writes)+1 {
			return fmt.Errorf("idemdynamo: complete: transaction cancelled (%d reasons for %d writes): %w", len(reasons), len(writes)+1, err)
		}
		own := reasons[len(writes)]
		if aws.ToString(own.Code) == dynamolease.ReasonConditionalCheck {
			if dynamolease.CompletedBy(own.Item, token) {
				return nil // a retry of a transaction that had committed
			}
			return fmt.Errorf("idemdynamo: complete: %w", idempotency.ErrNotOwner)
		}
		// A build that asks for another attempt judges first (an outbox
		// order conflict is a failed condition it knows how to fix).
		if rebuilds < maxRebuilds-1 && slices.ContainsFunc(w.builds, func(b builder) bool { return b.retry != nil && b.retry(err) }) {
			rebuilds++
			continue
		}
		conflict := aws.ToString(own.Code) == dynamolease.ReasonTransactionConflict
		for i, r := range reasons[:len(writes)] {
			switch aws.ToString(r.Code) {
			case dynamolease.ReasonConditionalCheck:
				return &idempotency.ConditionError{Index: i, Reason: aws.ToString(r.Message), Err: err}
			case dynamolease.ReasonTransactionConflict:
				conflict = true
			case dynamolease.ReasonValidation:
				return fmt.Errorf("idemdynamo: complete: write %d is invalid: %s: %w", i, aws.ToString(r.Message), permanent{err})
			}
		}
		if !conflict || conflicts >= s.conflicts {
			return fmt.Errorf("idemdynamo: complete: transaction cancelled: %w", err)
		}
		conflicts++
		select {
		case <-ctx.Done():
			return fmt.Errorf("idemdynamo: complete: transaction conflict: %w", context.Cause(ctx))
		case <-time.After(time.Duration(rand.Int64N(int64(20*time.Millisecond) << conflicts))):
		}
	}
}

// permanent marks err as one no retry can fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

func (p permanent) Unwrap() []error { return []error{p.err, idempotency.ErrPermanent} }

// unknown marks err as one after which the commit may have been applied.
type unknown struct{ err error }

func (u unknown) Error() string { return u.err.Error() }

func (u unknown) Unwrap() []error { return []error{u.err, idempotency.ErrOutcomeUnknown} }

// classify marks a TransactWriteItems error (other than a cancellation)
// by what it says of the commit, by error code: a request DynamoDB
// rejects as invalid (ValidationException, a transaction over 4 MB among
// them) or a missing table is permanent; an answer that never came (a
// timeout, a broken connection), an internal error and a transaction
// still in progress leave the outcome unknown; any other error code
// (throttling) is an answer: nothing was committed.
func classify(err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return unknown{err}
	}
	switch ae.ErrorCode() {
	case "ValidationException", "ResourceNotFoundException", "SerializationException":
		return permanent{err}
	case "InternalServerError", "InternalFailure", "ServiceUnavailable", "TransactionInProgressException":
		return unknown{err}
	}
	return err
}

// maxRebuilds is how many attempts a completion with builds makes when
// they keep asking for another ([TransactFunc]).
const maxRebuilds = 5

// work is what Transact and TransactFunc attached to one request.
type work struct {
	fixed  []types.TransactWriteItem
	builds []builder
}

// workOf sorts the request's attached work into fixed writes and builds,
// each in the order attached; work of another package is refused.
func workOf(attached []any) (work, error) {
	var w work
	for _, a := range attached {
		switch a := a.(type) {
		case writes:
			w.fixed = append(w.fixed, a...)
		case builder:
			w.builds = append(w.builds, a)
		default:
			return work{}, fmt.Errorf("idemdynamo: complete: cannot commit %T (attach DynamoDB writes with idemdynamo.Transact): %w", a, idempotency.ErrWorkUnsupported)
		}
	}
	return w, nil
}

// build returns the writes for one attempt: the fixed ones, then each
// build's, in order.
func (w work) build() ([]types.TransactWriteItem, error) {
	writes := slices.Clone(w.fixed)
	for _, b := range w.builds {
		bw, err := b.build()
		if err != nil {
			return nil, err
		}
		writes = append(writes, bw...)
	}
	return writes, nil
}

// commit sends one fresh TransactWriteItemsInput (never reused: the SDK
// keeps its idempotency token in it).
func (s *Store) commit(ctx context.Context, key, token string, writes []types.TransactWriteItem, resp idempotency.Response) error {
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	items = append(items, writes...)
	items = append(items, types.TransactWriteItem{Update: s.completeUpdate(key, token, resp)})
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, dynamohttp.Guard)
	return err
}

// Release implements [idempotency.Store].
func (s *Store) Release(ctx context.Context, key, token string) error {
	return s.lease().Release(ctx, s.PK(key), token)
}

var _ idempotency.StepStore = (*Store)(nil)

// SaveSteps implements [idempotency.StepStore] with one conditional
// UpdateItem (the steps are written whole).
func (s *Store) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	return s.lease().SaveSteps(ctx, s.PK(key), token, steps)
}

// Unknown implements [idempotency.StepStore] with a Scan of the table
// (paged, filtered on unknown_step and the namespace): an operator's
// call. The client must have Scan (*dynamodb.Client does).
func (s *Store) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	return s.lease().Unknown(ctx, s.ns, limit)
}

// Resolve implements [idempotency.StepStore]: a strongly consistent
// GetItem, then an UpdateItem conditioned on the record's token and ended
// lease. The client must have GetItem (*dynamodb.Client does).
func (s *Store) Resolve(ctx context.Context, key, name string, applied bool) error {
	return s.lease().Resolve(ctx, s.PK(key), name, applied)
}

// itemGetter is the read Lookup makes; *dynamodb.Client has it. It is
// not part of DynamoDBAPI, so that the clients and fakes written for the
// store's other calls still fit.
type itemGetter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var _ idempotency.Lookuper = (*Store)(nil)

// Lookup implements [idempotency.Lookuper] with one strongly consistent
// GetItem. The store's client must have GetItem (*dynamodb.Client has).
func (s *Store) Lookup(ctx context.Context, key string) (idempotency.Record, error) {
	g, ok := s.client.(itemGetter)
	if !ok {
		return idempotency.Record{}, errors.New("idemdynamo: lookup: the store's client has no GetItem method")
	}
	out, err := g.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{AttrPK: str(s.PK(key))},
		ConsistentRead: aws.Bool(true),
	}, dynamohttp.Guard)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("idemdynamo: lookup: %w", err)
	}
	item := out.Item
	exp := time.Unix(dynamolease.GetN(item, AttrExpiresAt), 0)
	if len(item) == 0 || exp.Before(s.now()) {
		return idempotency.Record{}, idempotency.ErrNoRecord
	}
	rec := idempotency.Record{ExpiresAt: exp, Steps: dynamolease.ParseSteps(item)}
	if v, ok := item[AttrStatus].(*types.AttributeValueMemberS); ok {
		rec.Status = v.Value
	}
	if v, ok := item[AttrFingerprint].(*types.AttributeValueMemberS); ok {
		rec.Fingerprint = v.Value
	}
	if rec.Status == idempotency.StatusCompleted {
		resp := parseResponse(item)
		rec.Response = &resp
	} else if ms := dynamolease.GetN(item, AttrLeaseUntil); ms != 0 {
		rec.LeaseUntil = time.UnixMilli(ms)
	}
	return rec, nil
}
