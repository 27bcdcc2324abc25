package dedupedynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/dynamohttp"
	"github.com/sqsonce/sqsonce/internal/dynamolease"
	"github.com/sqsonce/sqsonce/internal/steprec"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// DynamoDB's TransactWriteItems limits.
const (
	// MaxTransactItems is the most writes one transaction takes; the dedupe
	// record is one of them, so a TxFunc may return MaxTransactItems-1.
	MaxTransactItems = 100
	// MaxTransactBytes is the most data one transaction takes (4 MB).
	MaxTransactBytes = 4 << 20
)

// TxFunc computes a message's effect as DynamoDB writes. It must not write
// anything itself: sqsonce commits the writes it returns, with the
// message's COMPLETED dedupe record, in one TransactWriteItems. It runs
// once per delivery, so more than once for one message: for a redelivery
// overlapping the first delivery, and for every duplicate of a message
// already committed unless [TxOptions].SkipCompleted is set. Only one
// run's writes ever commit.
type TxFunc func(ctx context.Context, msg *sqsmsg.Message) ([]types.TransactWriteItem, error)

// TxOptions configures [Transactional]; nil or a zero field takes the
// default.
type TxOptions struct {
	// FingerprintFunc fingerprints a message: the same key with a different
	// fingerprint is key reuse. Defaults to dedupe.Fingerprint of the body.
	FingerprintFunc func(*sqsmsg.Message) string
	// ConflictRetries is how many times a transaction cancelled by a
	// TransactionConflict is resubmitted at once (with a short jittered
	// pause) before the message is retried with backoff. Defaults to 3.
	ConflictRetries int
	// SkipCompleted reads the message's dedupe record before fn runs: one
	// strongly consistent GetItem, no claim, no write. When the record is
	// COMPLETED, unexpired and of the message's fingerprint, the message
	// is acked as a duplicate without running fn or sending a
	// transaction. Any other answer (no record, an expired one, a
	// lease-mode claim, another fingerprint, a failed read) runs fn and
	// lets the transaction decide, as without it. The read decides
	// nothing: two deliveries that both read before either commits both
	// run fn, and the transaction still commits one.
	//
	// It costs every message one read (a round trip and a read unit) and
	// saves each duplicate of a completed message a run of fn and a
	// cancelled TransactWriteItems. Turn it on when fn is costly (it
	// calls a service or reads other tables) or duplicates are common (SNS
	// publisher retries, redrives, workers killed between a commit and
	// its delete); the worker then needs dynamodb:GetItem on the dedupe
	// table. The bench table's look-ahead rows give its cost and its
	// saving.
	//
	// The read is strongly consistent: one read unit for the small
	// record, where an eventually consistent read costs half of one but
	// may miss a commit of about the last second, and a duplicate it
	// misses costs the run of fn and the transaction it was made to
	// save. Half a read unit is little beside the transaction it saves
	// (two write units per item written, each priced several times a read
	// unit), and duplicates that arrive close together (a publisher
	// retrying at once, SQS delivering a message twice) are the ones an
	// eventually consistent read would miss.
	//
	// Defaults to false: most messages are not duplicates, so the read
	// would mostly be paid for nothing, and a worker whose role grants
	// only the writes keeps working.
	SkipCompleted bool
}

// TooLargeError reports a transaction over DynamoDB's limits: more than
// [MaxTransactItems] writes (the dedupe record included) or more than
// [MaxTransactBytes]. Retrying cannot fix it: [Transactional] returns it
// wrapped in sqsmsg.Permanent.
type TooLargeError struct {
	Items int // writes, the dedupe record included
	Bytes int // estimated request size
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("dedupedynamo: transaction too large: %d items (max %d, the dedupe record included), ~%d bytes (max %d)",
		e.Items, MaxTransactItems, e.Bytes, MaxTransactBytes)
}

// ConditionError reports a condition on one of the handler's own writes
// failing: the transaction was cancelled and nothing was written, the
// dedupe record included. By default it is a transient failure (retried
// with backoff); classify it with errors.As to decide otherwise.
type ConditionError struct {
	// Index is the failed write's index in the TxFunc's result.
	Index int
	// Reason is DynamoDB's cancellation reason for that write; Reason.Item
	// holds the item's old values when the write asked for them with
	// ReturnValuesOnConditionCheckFailure.
	Reason types.CancellationReason
	// Err is the TransactionCanceledException.
	Err error
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("dedupedynamo: transaction: condition failed on write %d: %s", e.Index, aws.ToString(e.Reason.Message))
}

func (e *ConditionError) Unwrap() error { return e.Err }

// Transactional returns a handler that commits fn's writes and the
// message's COMPLETED dedupe record in one TransactWriteItems:
//
//   - fn runs for every delivery, a duplicate's included: no claim is
//     made and, by default, the record is not read, so a duplicate is
//     found by the commit. Its writes are then discarded with the
//     cancelled transaction and applied by no one, so a duplicate costs a
//     run of fn and a transaction, never a second effect. With
//     [TxOptions].SkipCompleted one read before fn acks the duplicates of
//     a completed key without running fn.
//   - The dedupe record is written with condition "attribute_not_exists(pk)
//     OR expires_at < :now OR (status = IN_PROGRESS AND lease_until <
//     :now_ms)": no claim is made first, the transaction itself decides.
//   - A failed condition on the dedupe record → duplicate (acked), or key
//     reuse (dead-lettered), or in progress (a lease-mode claim on the same
//     namespace: retried after its lease).
//   - A failed version clause on a [VersionGuard]ed write (the item's
//     stored version is the message's or newer) → the message is stale:
//     the dedupe record alone is committed and the message acked.
//   - A failed condition on another of fn's writes, or of a guarded write's
//     own clause → [*ConditionError] (retried with backoff unless a
//     classifier decides otherwise); nothing is committed.
//   - TransactionConflict → resubmitted (a fresh request each time), then
//     retried with backoff; throttling → retried with backoff.
//   - More than 99 writes, or more than 4 MB → [*TooLargeError], permanent.
//
// Effects inside DynamoDB are then exactly once, across crashes, overlapping
// deliveries and redrives. It needs no claim. Under the dedupe middleware
// (dedupe.New) with the same store, as the final step of a handler that
// records steps (package step), it completes the middleware's claim
// instead: the record's update to COMPLETED, fenced by the claim's token,
// commits with fn's writes (a lost claim: [dedupe.ErrNotOwner], nothing
// committed).
func Transactional(store *Store, fn TxFunc, opts *TxOptions) sqsmsg.Handler {
	var o TxOptions
	if opts != nil {
		o = *opts
	}
	if o.FingerprintFunc == nil {
		o.FingerprintFunc = func(m *sqsmsg.Message) string { return dedupe.Fingerprint(m.Body) }
	}
	if o.ConflictRetries == 0 {
		o.ConflictRetries = 3
	}
	return &txHandler{s: store, fn: fn, opts: o}
}

type txHandler struct {
	s    *Store
	fn   TxFunc
	opts TxOptions
	// testHook, when set by a test, is called with a point in the commit
	// ("before-commit", "after-commit") and the message key.
	testHook func(point, key string)
}

func (h *txHandler) Handle(ctx context.Context, msg *sqsmsg.Message) error {
	key := msg.Key()
	fp := h.opts.FingerprintFunc(msg)
	// Built only when something is logged: With encodes its fields at once.
	log := func() *zap.Logger {
		return h.s.log.With(zap.String("message_id", msg.ID), zap.String("dedupe_key", key))
	}
	claim := steprec.ClaimFrom(ctx, h.s)
	if h.opts.SkipCompleted && claim == nil {
		done, err := h.completed(ctx, key, fp)
		switch {
		case done:
			return duplicate(key)
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("dedupedynamo: read dedupe record: %w", context.Cause(ctx))
		case err != nil:
			log().Warn("dedupedynamo: SkipCompleted: reading the dedupe record failed; running the handler, the transaction decides", zap.Error(err))
		}
	}
	writes, err := h.fn(ctx, msg)
	if err != nil {
		return err
	}
	if n, size := len(writes)+1, estimateSize(writes); n > MaxTransactItems || size > MaxTransactBytes {
		return sqsmsg.Permanent(&TooLargeError{Items: n, Bytes: size})
	}
	if claim != nil {
		return claim.Completing(func() (bool, error) {
			err := h.commitLoop(ctx, key, fp, writes, claim, log)
			return err == nil, err
		})
	}
	return h.commitLoop(ctx, key, fp, writes, nil, log)
}

// commitLoop commits writes with the message's record: a COMPLETED record
// put on the condition that no live record holds the key, or, under
// dedupe.Middleware with this store (claim set: the handler's final
// step), the claim's record completed (fenced by its token).
func (h *txHandler) commitLoop(ctx context.Context, key, fp string, writes []types.TransactWriteItem, claim *steprec.Claim, log func() *zap.Logger) error {
	conflicts := 0
	for attempt := 0; ; attempt++ {
		if h.testHook != nil {
			h.testHook("before-commit", key)
		}
		now := h.s.now()
		err := h.commit(ctx, key, fp, writes, now, claim)
		if err == nil {
			if h.testHook != nil {
				h.testHook("after-commit", key)
			}
			return nil
		}
		var can *types.TransactionCanceledException
		if !errors.As(err, &can) {
			if isValidation(err) {
				return sqsmsg.Permanent(fmt.Errorf("dedupedynamo: transaction rejected: %w", err))
			}
			return fmt.Errorf("dedupedynamo: transaction: %w", err)
		}
		c := decodeCancel(writes, can.CancellationReasons)
		switch {
		case c.mismatch:
			return fmt.Errorf("dedupedynamo: transaction cancelled (%d reasons for %d writes): %w", len(can.CancellationReasons), len(writes)+1, err)
		case c.recordFailed && claim != nil:
			if dynamolease.CompletedBy(c.record, claim.Token) {
				return nil // a retry of a transaction that had committed
			}
			return fmt.Errorf("dedupedynamo: transaction: %w", dedupe.ErrNotOwner)
		case c.recordFailed:
			r, live := h.s.lease().Conflict(c.record, fp, now)
			if !live && attempt < 2 {
				continue // dead by our clock: try again
			}
			return h.blocked(claimOf(r), key, fp, now, log)
		case c.userFailed >= 0:
			return &ConditionError{Index: c.userFailed, Reason: can.CancellationReasons[c.userFailed], Err: err}
		case c.stale >= 0:
			log().Info("dedupedynamo: stale version: the message's writes are skipped and it is recorded as done", zap.Int("write", c.stale))
			writes = nil
			continue
		case c.conflict && conflicts < h.opts.ConflictRetries:
			conflicts++
			select {
			case <-ctx.Done():
				return fmt.Errorf("dedupedynamo: transaction conflict: %w", context.Cause(ctx))
			case <-time.After(time.Duration(rand.Int64N(int64(20*time.Millisecond) << conflicts))):
			}
			continue
		case c.rejected >= 0:
			msg := aws.ToString(can.CancellationReasons[c.rejected].Message)
			return sqsmsg.Permanent(fmt.Errorf("dedupedynamo: transaction rejected: %s: %w", msg, err))
		}
		return fmt.Errorf("dedupedynamo: transaction cancelled: %w", err)
	}
}

// completed reports whether key's dedupe record is COMPLETED, live by the
// store's clock and of fingerprint fp (the record a commit would find
// and answer with a duplicate): one strongly consistent GetItem.
func (h *txHandler) completed(ctx context.Context, key, fp string) (bool, error) {
	out, err := h.s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(h.s.table),
		Key:            dynamolease.Key(h.s.PK(key)),
		ConsistentRead: aws.Bool(true),
	}, dynamohttp.Guard)
	if err != nil {
		return false, err
	}
	r, live := h.s.lease().Conflict(out.Item, fp, h.s.now())
	return live && r.Outcome == dynamolease.Completed, nil
}

// duplicate is the handler's answer for a key already completed.
func duplicate(key string) error { return &dedupe.DuplicateError{Key: key} }

// blocked is the handler's answer when the message's dedupe record
// already exists: c is what the record holds.
func (h *txHandler) blocked(c dedupe.Claim, key, fp string, now time.Time, log func() *zap.Logger) error {
	switch c.Status {
	case dedupe.Duplicate:
		return duplicate(key)
	case dedupe.KeyReused:
		kerr := &dedupe.KeyReuseError{Key: key, Fingerprint: fp, Stored: c.Fingerprint}
		log().WithOptions(noStack).Error("dedupedynamo: KEY REUSE: the same dedupe key arrived with a different body; dead-lettering it",
			zap.String("fingerprint", fp), zap.String("stored_fingerprint", c.Fingerprint))
		return sqsmsg.Permanent(kerr)
	default:
		wait := max(c.LeaseUntil.Sub(now), time.Second)
		return sqsmsg.RetryAfter(&dedupe.InProgressError{Key: key, LeaseUntil: c.LeaseUntil}, wait)
	}
}

// cancellation is what a TransactionCanceledException's reasons say about
// one commit of writes followed by the dedupe record.
type cancellation struct {
	// mismatch: the reasons do not line up with the writes (one per write
	// plus the record); nothing else is decoded.
	mismatch bool
	// recordFailed: the dedupe record's condition failed; record is the
	// stored item that blocked it. It takes precedence over the writes.
	recordFailed bool
	record       map[string]types.AttributeValue
	// userFailed is the first write whose own condition failed (not a
	// VersionGuard's version clause), or -1.
	userFailed int
	// stale is the first write whose version clause failed, or -1. The
	// message is stale only when userFailed is -1.
	stale int
	// conflict: some write, or the record, met a TransactionConflict.
	conflict bool
	// rejected is the first reason (write or record) that is a
	// ValidationError, or -1.
	rejected int
}

// decodeCancel reads the cancellation reasons of a transaction of writes
// plus the dedupe record (last). It decides nothing: Handle does.
func decodeCancel(writes []types.TransactWriteItem, reasons []types.CancellationReason) cancellation {
	c := cancellation{userFailed: -1, stale: -1, rejected: -1}
	if len(reasons) != len(writes)+1 {
		c.mismatch = true
		return c
	}
	own := reasons[len(writes)]
	if code(own) == dynamolease.ReasonConditionalCheck {
		c.recordFailed, c.record = true, own.Item
		return c
	}
	c.conflict = code(own) == dynamolease.ReasonTransactionConflict
	for i, r := range reasons[:len(writes)] {
		switch code(r) {
		case dynamolease.ReasonConditionalCheck:
			switch {
			case c.userFailed >= 0:
			case staleVersion(writes[i], r):
				if c.stale < 0 {
					c.stale = i
				}
			default:
				c.userFailed = i
			}
		case dynamolease.ReasonTransactionConflict:
			c.conflict = true
		}
	}
	for i, r := range reasons {
		if code(r) == dynamolease.ReasonValidation {
			c.rejected = i
			break
		}
	}
	return c
}

// commit sends one fresh TransactWriteItemsInput (never reused: the SDK
// stores its idempotency token in it, and a reused input would replay the
// first call's result).
func (h *txHandler) commit(ctx context.Context, key, fp string, writes []types.TransactWriteItem, now time.Time, claim *steprec.Claim) error {
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	items = append(items, writes...)
	if claim != nil {
		l := h.s.lease()
		items = append(items, types.TransactWriteItem{Update: l.CompleteUpdate(h.s.PK(key), claim.Token, "", nil, nil)})
	} else {
		items = append(items, types.TransactWriteItem{Put: h.s.lease().CompletedPut(h.s.PK(key), fp, now)})
	}
	_, err := h.s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, dynamohttp.Guard)
	return err
}

// estimateSize approximates the request's size the way DynamoDB counts
// items: attribute names plus values, keys and expression values. DynamoDB
// remains the judge; this catches the obvious cases with a clear error.
func estimateSize(writes []types.TransactWriteItem) int {
	n := 0
	for _, w := range writes {
		switch {
		case w.Put != nil:
			n += itemSize(w.Put.Item) + itemSize(w.Put.ExpressionAttributeValues)
		case w.Update != nil:
			n += itemSize(w.Update.Key) + itemSize(w.Update.ExpressionAttributeValues) + len(aws.ToString(w.Update.UpdateExpression))
		case w.Delete != nil:
			n += itemSize(w.Delete.Key) + itemSize(w.Delete.ExpressionAttributeValues)
		case w.ConditionCheck != nil:
			n += itemSize(w.ConditionCheck.Key) + itemSize(w.ConditionCheck.ExpressionAttributeValues)
		}
	}
	return n
}

func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += len(s)/2 + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + itemSize(v.Value)
	}
	return 0
}

// cloneNames returns a copy of m (nil-safe) for adding names.
func cloneNames(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	maps.Copy(out, m)
	return out
}

func cloneValues(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(m)+1)
	maps.Copy(out, m)
	return out
}

// noStack keeps the stack trace a logger adds at error level (as
// zap.NewProduction's does) off a line that reports an outcome, such as
// key reuse: the library's own frames say nothing about its cause.
var noStack = zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false }))
