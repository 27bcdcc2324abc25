// Package dynamolease is the DynamoDB lease record that the dedupe and
// idempotency stores share: one item per key, claimed with a conditional
// PutItem, held under a lease, fenced by the claim's token, then COMPLETED
// or released. docs/architecture.md describes the record's states.
//
// The stores keep their own public types; this package speaks in
// [Result] and plain errors, and each store maps them to its own names.
package dynamolease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/dynamohttp"
	"github.com/sqsonce/sqsonce/internal/dynamotable"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/step"
)

// Attribute names of a lease record.
const (
	AttrPK          = "pk"          // S: "<namespace>#<key>" (see leasekey.PK)
	AttrStatus      = "status"      // S: IN_PROGRESS or COMPLETED
	AttrLeaseUntil  = "lease_until" // N: ms since the epoch
	AttrToken       = "token"       // S: random per claim
	AttrFingerprint = "fingerprint" // S: hash of the body or request
	AttrExpiresAt   = "expires_at"  // N: s since the epoch; the TTL attribute
	// AttrSteps holds the handler's steps (package step), when it records
	// any: M of step name → M (see encodeSteps).
	AttrSteps = "steps"
	// AttrUnknownStep names a step whose outcome is unknown (S), absent
	// when none is: what an operator's listing filters on.
	AttrUnknownStep = "unknown_step"
)

// Record statuses as stored.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// Cancellation reason codes of a TransactionCanceledException.
const (
	ReasonNone                  = "None"
	ReasonConditionalCheck      = "ConditionalCheckFailed"
	ReasonTransactionConflict   = "TransactionConflict"
	ReasonThrottling            = "ThrottlingError"
	ReasonProvisionedThroughput = "ProvisionedThroughputExceeded"
	ReasonValidation            = "ValidationError"
)

// API is the part of the DynamoDB client the record code calls.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Num is a DynamoDB number.
func Num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Str is a DynamoDB string.
func Str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// Outcome is what a claim found.
type Outcome int

const (
	// Claimed: the caller owns the key until its lease ends.
	Claimed Outcome = iota + 1
	// Completed: the record is COMPLETED.
	Completed
	// InProgress: another owner holds the key until Result.LeaseUntil.
	InProgress
	// KeyReused: the record's fingerprint differs from the caller's.
	KeyReused
)

// Result is the answer to a claim.
type Result struct {
	Outcome Outcome
	// Token fences the claim (Claimed only).
	Token string
	// LeaseUntil is the caller's lease end when Claimed, the other owner's
	// when InProgress.
	LeaseUntil time.Time
	// Fingerprint is the stored record's fingerprint (all but Claimed).
	Fingerprint string
	// Item is the stored record that blocked the claim (all but Claimed),
	// for the attributes a store adds to it.
	Item map[string]types.AttributeValue
	// Steps are the steps of the record a claim took over (Claimed only).
	Steps map[string]step.Record
}

// Table is one store's view of its table.
type Table struct {
	Client API
	Name   string
	// TTL is how long a record lives after its last write.
	TTL time.Duration
	Now func() time.Time
	// LenientFingerprint makes an empty fingerprint, given or stored,
	// match any (the dedupe store's rule: fingerprinting is optional
	// there). Otherwise fingerprints must be equal.
	LenientFingerprint bool
	// ErrNotOwner is the store's sentinel that a fenced write wraps when
	// its token no longer holds the key.
	ErrNotOwner error
	// Prefix starts the errors: the store's package ("dedupedynamo").
	Prefix string
}

// claimCondition admits a claim of fingerprint at now when there is no
// live record: none, an expired one (TTL deletion lags up to 48 hours), or
// an IN_PROGRESS one of the same fingerprint whose lease has ended. A
// record of another fingerprint is never taken over before it expires:
// its crashed owner's effects are unknown, and the key stays its
// request's. It returns the condition with its names and values.
func (t *Table) claimCondition(fingerprint string, now time.Time, keepSteps bool) (string, map[string]string, map[string]types.AttributeValue) {
	names := map[string]string{"#pk": AttrPK, "#exp": AttrExpiresAt, "#st": AttrStatus, "#lu": AttrLeaseUntil}
	values := map[string]types.AttributeValue{
		":now":         Num(now.Unix()),
		":now_ms":      Num(now.UnixMilli()),
		":in_progress": Str(StatusInProgress),
	}
	same := ""
	switch {
	case t.LenientFingerprint && fingerprint == "":
		// An empty fingerprint matches any.
	case t.LenientFingerprint:
		same = " AND (#fp = :fp OR #fp = :empty OR attribute_not_exists(#fp))"
		names["#fp"], values[":fp"], values[":empty"] = AttrFingerprint, Str(fingerprint), Str("")
	default:
		same = " AND #fp = :fp"
		names["#fp"], values[":fp"] = AttrFingerprint, Str(fingerprint)
	}
	if keepSteps {
		// A claim takes a record that holds steps over with takeOver,
		// which keeps them; the put never replaces it.
		names["#steps"] = AttrSteps
		same = " AND attribute_not_exists(#steps)" + same
	}
	return "attribute_not_exists(#pk) OR #exp < :now OR (#st = :in_progress AND #lu < :now_ms" + same + ")", names, values
}

// Claim takes pk for a lease of d with one conditional PutItem; on conflict the
// old item comes back with the error (no extra read), and Result says
// what it holds. A record that the server kept but that is dead by the
// client's clock is claimed again (twice at most).
func (t *Table) Claim(ctx context.Context, pk, fingerprint string, d time.Duration) (Result, error) {
	for attempt := 0; ; attempt++ {
		now := t.Now()
		token := leasekey.NewToken()
		until := now.Add(d)
		p := t.claimPut(pk, StatusInProgress, token, fingerprint, now, true)
		p.Item[AttrLeaseUntil] = Num(until.UnixMilli())
		_, err := t.Client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           p.TableName,
			Item:                                p.Item,
			ConditionExpression:                 p.ConditionExpression,
			ExpressionAttributeNames:            p.ExpressionAttributeNames,
			ExpressionAttributeValues:           p.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: p.ReturnValuesOnConditionCheckFailure,
		}, dynamohttp.Guard)
		if err == nil {
			return Result{Outcome: Claimed, Token: token, LeaseUntil: until}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return Result{}, fmt.Errorf("%s: claim: %w", t.Prefix, err)
		}
		old := Parse(ccf.Item)
		if old.Token == token && old.Status == StatusInProgress {
			// Our own write: the SDK retried a PutItem that had been
			// applied but whose answer was lost (a reset, a timeout).
			return Result{Outcome: Claimed, Token: token, LeaseUntil: until}, nil
		}
		r, live := t.Conflict(ccf.Item, fingerprint, now)
		if !live && hasSteps(ccf.Item) && r.Outcome == InProgress {
			// A dead claim whose record holds steps: taken over in place,
			// its steps kept.
			r, err := t.takeOver(ctx, pk, ccf.Item, d)
			if err != nil || r.Outcome != 0 {
				return r, err
			}
			if attempt >= 2 {
				// Changed under us three times in a row: busy for a moment.
				return Result{Outcome: InProgress, LeaseUntil: now.Add(time.Second)}, nil
			}
			continue
		}
		if live || attempt >= 2 {
			return r, nil
		}
		// The returned item is dead by our own clock (expired, or an ended
		// lease): the server and we disagree on the boundary; claim again.
	}
}

// CompletedPut records pk as COMPLETED at now with no lease before it:
// the put a transaction commits next to the writes it makes once. It takes
// the key on the condition Claim uses, and returns the old item when that
// fails.
func (t *Table) CompletedPut(pk, fingerprint string, now time.Time) *types.Put {
	return t.claimPut(pk, StatusCompleted, leasekey.NewToken(), fingerprint, now, false)
}

// claimPut writes a record of status and token on the claim's condition
// at now, returning the old item when that fails. With keepSteps a dead
// claim whose record holds steps is not replaced (Claim takes it over in
// place); without, it is (a transaction completing the key for good).
func (t *Table) claimPut(pk, status, token, fingerprint string, now time.Time, keepSteps bool) *types.Put {
	cond, names, values := t.claimCondition(fingerprint, now, keepSteps)
	return &types.Put{
		TableName: aws.String(t.Name),
		Item: map[string]types.AttributeValue{
			AttrPK:          Str(pk),
			AttrStatus:      Str(status),
			AttrToken:       Str(token),
			AttrFingerprint: Str(fingerprint),
			AttrExpiresAt:   Num(now.Add(t.TTL).Unix()),
		},
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// Record is a lease record as read back.
type Record struct {
	Status      string
	Token       string
	Fingerprint string
	LeaseUntil  time.Time
	ExpiresAt   int64 // s
}

// Parse reads a record's lease attributes from item.
func Parse(item map[string]types.AttributeValue) Record {
	r := Record{
		Status:      GetS(item, AttrStatus),
		Token:       GetS(item, AttrToken),
		Fingerprint: GetS(item, AttrFingerprint),
		ExpiresAt:   GetN(item, AttrExpiresAt),
	}
	if ms := GetN(item, AttrLeaseUntil); ms != 0 {
		r.LeaseUntil = time.UnixMilli(ms)
	}
	return r
}

// GetS returns item's string attribute name, or "".
func GetS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// GetN returns item's number attribute name as an int64, or 0.
func GetN(item map[string]types.AttributeValue, name string) int64 {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// Conflict turns the record item that blocked a claim into the claim's
// answer. live=false means the record is dead by the client's clock
// (checked here too: expiry is never trusted to the server's TTL deletion
// alone). A lease that ended frees the key for the same fingerprint only:
// another is key reuse until the record expires.
func (t *Table) Conflict(item map[string]types.AttributeValue, fingerprint string, now time.Time) (Result, bool) {
	r := Parse(item)
	dead := Result{Outcome: InProgress, LeaseUntil: now}
	if r.Status == "" || r.ExpiresAt < now.Unix() {
		return dead, false
	}
	c := Result{Fingerprint: r.Fingerprint, Item: item}
	reused := r.Fingerprint != fingerprint
	if t.LenientFingerprint {
		reused = reused && r.Fingerprint != "" && fingerprint != ""
	}
	switch {
	case reused:
		c.Outcome = KeyReused
	case r.Status == StatusCompleted:
		c.Outcome = Completed
	case r.LeaseUntil.Before(now):
		return dead, false
	default:
		c.Outcome = InProgress
		c.LeaseUntil = r.LeaseUntil
	}
	return c, true
}

// ownedCondition fences Extend, Complete and Release by the claim token.
const ownedCondition = "#tk = :tk AND #st = :in_progress"

func ownedValues(token string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{":tk": Str(token), ":in_progress": Str(StatusInProgress)}
}

// Key is the item key of pk.
func Key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: Str(pk)}
}

// fenced maps a failed fenced write to the store's ErrNotOwner.
func (t *Table) fenced(op string, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: %s: %w", t.Prefix, op, t.ErrNotOwner)
	}
	return fmt.Errorf("%s: %s: %w", t.Prefix, op, err)
}

// Extend moves the lease of the claim holding token to now+d.
func (t *Table) Extend(ctx context.Context, pk, token string, d time.Duration) error {
	now := t.Now()
	vals := ownedValues(token)
	vals[":lu"] = Num(now.Add(d).UnixMilli())
	vals[":exp"] = Num(now.Add(t.TTL).Unix())
	_, err := t.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.Name),
		Key:                       Key(pk),
		UpdateExpression:          aws.String("SET #lu = :lu, #exp = :exp"),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#lu": AttrLeaseUntil, "#exp": AttrExpiresAt},
		ExpressionAttributeValues: vals,
	}, dynamohttp.Guard)
	if err != nil {
		return t.fenced("extend", err)
	}
	return nil
}

// CompleteUpdate is the fenced update that marks the claim holding token
// COMPLETED. set adds assignments to its SET clause (", #a = :a, …") with
// their names and values (both may be nil).
func (t *Table) CompleteUpdate(pk, token, set string, names map[string]string, values map[string]types.AttributeValue) *types.Update {
	vals := ownedValues(token)
	vals[":completed"] = Str(StatusCompleted)
	vals[":exp"] = Num(t.Now().Add(t.TTL).Unix())
	for k, v := range values {
		vals[k] = v
	}
	n := map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#lu": AttrLeaseUntil, "#exp": AttrExpiresAt}
	for k, v := range names {
		n[k] = v
	}
	return &types.Update{
		TableName:                 aws.String(t.Name),
		Key:                       Key(pk),
		UpdateExpression:          aws.String("SET #st = :completed, #exp = :exp" + set + " REMOVE #lu"),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  n,
		ExpressionAttributeValues: vals,
		// The old item tells a retried completion that had been applied
		// (same token, COMPLETED) from a lost claim.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// Complete applies u (from CompleteUpdate) with one UpdateItem. A retry of
// an update that had been applied succeeds; a lost claim is ErrNotOwner.
func (t *Table) Complete(ctx context.Context, token string, u *types.Update) error {
	_, err := t.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           u.TableName,
		Key:                                 u.Key,
		UpdateExpression:                    u.UpdateExpression,
		ConditionExpression:                 u.ConditionExpression,
		ExpressionAttributeNames:            u.ExpressionAttributeNames,
		ExpressionAttributeValues:           u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure,
	}, dynamohttp.Guard)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && CompletedBy(ccf.Item, token) {
		return nil
	}
	if err != nil {
		return t.fenced("complete", err)
	}
	return nil
}

// CompletedBy reports whether item, returned by a failed completion, is
// the record that completion had already written: COMPLETED by token.
func CompletedBy(item map[string]types.AttributeValue, token string) bool {
	r := Parse(item)
	return r.Token == token && r.Status == StatusCompleted
}

// Release deletes the IN_PROGRESS claim holding token. A record that holds
// steps is kept instead, its lease ended and its token retired, so that
// the next claim resumes from them (two calls: the delete's condition
// refuses it, then an update).
func (t *Table) Release(ctx context.Context, pk, token string) error {
	_, err := t.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           aws.String(t.Name),
		Key:                                 Key(pk),
		ConditionExpression:                 aws.String(ownedCondition + " AND attribute_not_exists(#steps)"),
		ExpressionAttributeNames:            map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#steps": AttrSteps},
		ExpressionAttributeValues:           ownedValues(token),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, dynamohttp.Guard)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && hasSteps(ccf.Item) {
		return t.releaseKeepingSteps(ctx, pk, token)
	}
	if err != nil {
		return t.fenced("release", err)
	}
	return nil
}

// Code is a cancellation reason's code, "" when it has none.
func Code(r types.CancellationReason) string { return aws.ToString(r.Code) }

// Check verifies at start-up that the lease table exists with the key
// schema the stores need ([dynamotable.Lease]), with an error that says
// what to fix. A table without TTL on expires_at is only logged: its
// records are then never deleted.
func Check(ctx context.Context, client dynamotable.API, table string, schema dynamotable.Schema, log *zap.Logger) error {
	if err := dynamotable.Check(ctx, client, table, schema); err != nil {
		return err
	}
	if on, err := dynamotable.TTLEnabled(ctx, client, table, schema); err == nil && !on {
		log.Warn(schema.Prefix+": TTL is not enabled on "+schema.TTL+": records will never be deleted (run "+schema.Prefix+".CreateTable or enable TTL)",
			zap.String("table", table))
	}
	return nil
}
