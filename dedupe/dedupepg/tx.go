package dedupepg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/pgutil"
	"github.com/sqsonce/sqsonce/internal/steprec"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// TxFunc applies a message's effect with tx, the transaction that also
// holds the message's dedupe row. It must not commit or roll back tx. It
// runs again, in a new transaction, when a transaction fails transiently;
// only one run's statements ever commit.
type TxFunc func(ctx context.Context, tx pgx.Tx, msg *sqsmsg.Message) error

// TxOptions configures [Transactional]; nil or a zero field takes the
// default.
type TxOptions struct {
	// FingerprintFunc fingerprints a message: the same key with a different
	// fingerprint is key reuse. Defaults to dedupe.Fingerprint of the body.
	FingerprintFunc func(*sqsmsg.Message) string
	// TxOptions is the transaction's isolation and access mode. Defaults
	// to PostgreSQL's (READ COMMITTED, read-write).
	TxOptions pgx.TxOptions
	// Retries is how many times a transaction that failed transiently (a
	// serialization failure, a deadlock, the connection lost or the backend
	// terminated; see pgstore.IsTransient) is run again at once, with a short
	// jittered pause, before the message is retried with the consumer's
	// backoff. Defaults to 3; -1 means none.
	Retries int
	// SkipCompleted reads the message's dedupe row before the
	// transaction: one plain SELECT on the pool, no claim, no lock. When
	// the row is COMPLETED, unexpired and of the message's fingerprint,
	// the message is acked as a duplicate without beginning a
	// transaction. Any other answer (no row, an expired one, a lease-mode
	// claim, another fingerprint, a row not yet committed, a failed read)
	// runs the transaction as without it, and the transaction decides.
	//
	// fn does not run for a completed key either way: the transaction
	// inserts the dedupe row before fn and stops at a live one. Without
	// the option a duplicate costs a transaction (BEGIN, the INSERT, a
	// SELECT, ROLLBACK: four round trips and a pooled connection held
	// for them); with it one SELECT, and every other message pays that
	// SELECT too. Turn it on when duplicates are common (SNS publisher
	// retries, redrives). The worker's role already has SELECT. The bench
	// table's look-ahead rows give its cost and its saving.
	//
	// Defaults to false: most messages are not duplicates, and a
	// duplicate already runs nothing of the handler's.
	SkipCompleted bool
}

// Transactional returns a handler that runs fn and inserts the message's
// COMPLETED dedupe row in one PostgreSQL transaction:
//
//   - The dedupe row is written first, with INSERT ... ON CONFLICT DO
//     NOTHING; only when the key has a row is it read, and a dead record
//     (expired, or a lease-mode claim of the same body whose lease ended)
//     taken over with INSERT ... ON CONFLICT DO UPDATE, judged under the
//     row's lock. A concurrent delivery of the same key blocks on the row
//     until this transaction ends, then sees it.
//   - A live record → [consumer.ErrDuplicate] (acked, fn not run), or key
//     reuse ([sqsmsg.Permanent] with a [*dedupe.KeyReuseError]), or a
//     lease-mode claim in progress ([consumer.RetryAfter] its lease). A
//     duplicate thus costs a transaction that is rolled back, not a run
//     of fn; with [TxOptions].SkipCompleted one SELECT before it acks the
//     duplicates of a completed key without beginning one.
//   - fn runs with the transaction; an error from fn rolls everything back
//     and is returned as fn classified it.
//   - Commit makes the row and fn's statements durable together. A crash
//     or a lost connection before it leaves nothing; after it, the next
//     delivery is a duplicate — also when the commit's answer was lost.
//   - A transient failure (pgstore.IsTransient) is retried in a new transaction
//     (TxOptions.Retries), then returned as a transient error.
//
// It needs no claim. Under the dedupe middleware (dedupe.New) with the
// same store, as the final step of a handler that records steps (package
// step), it completes the middleware's claim instead: the row is updated
// to COMPLETED in the transaction, fenced by the claim's token (a lost
// claim: [dedupe.ErrNotOwner], nothing committed), before fn runs.
func Transactional(store *Store, fn TxFunc, opts *TxOptions) sqsmsg.Handler {
	var o TxOptions
	if opts != nil {
		o = *opts
	}
	if o.FingerprintFunc == nil {
		o.FingerprintFunc = func(m *sqsmsg.Message) string { return dedupe.Fingerprint(m.Body) }
	}
	switch {
	case o.Retries == 0:
		o.Retries = 3
	case o.Retries < 0:
		o.Retries = 0
	}
	return &txHandler{s: store, fn: fn, opts: o}
}

type txHandler struct {
	s    *Store
	fn   TxFunc
	opts TxOptions
}

// errLost is a dedupe row that died between the write and the read: the
// attempt runs again.
var errLost = errors.New("dedupepg: dedupe record changed during the claim")

func (h *txHandler) Handle(ctx context.Context, msg *sqsmsg.Message) error {
	key := msg.Key()
	fp := h.opts.FingerprintFunc(msg)
	if h.opts.SkipCompleted && steprec.ClaimFrom(ctx, h.s) == nil {
		done, err := h.completed(ctx, key, fp)
		switch {
		case done:
			return duplicate(key)
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("dedupepg: read dedupe row: %w", context.Cause(ctx))
		case err != nil:
			h.s.log.Warn("dedupepg: SkipCompleted: reading the dedupe row failed; running the transaction, which decides",
				zap.String("message_id", msg.ID), zap.String("dedupe_key", key), zap.Error(err))
		}
	}
	for attempt := 0; ; attempt++ {
		err := h.attempt(ctx, key, fp, msg)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errLost) && !pgutil.Transient(err) {
			return err
		}
		if attempt >= h.opts.Retries || ctx.Err() != nil {
			return fmt.Errorf("dedupepg: transaction failed %d times: %w", attempt+1, err)
		}
		h.s.log.Warn("dedupepg: transaction failed transiently; running it again",
			zap.String("message_id", msg.ID), zap.String("dedupe_key", key), zap.Int("attempt", attempt+1), zap.Error(err))
		select {
		case <-ctx.Done():
			return fmt.Errorf("dedupepg: transaction: %w", context.Cause(ctx))
		case <-time.After(time.Duration(rand.Int64N(int64(20*time.Millisecond) << attempt))):
		}
	}
}

// attempt runs one transaction.
func (h *txHandler) attempt(ctx context.Context, key, fp string, msg *sqsmsg.Message) (err error) {
	tx, err := h.s.db.BeginTx(ctx, h.opts.TxOptions)
	if err != nil {
		return fmt.Errorf("dedupepg: begin: %w", err)
	}
	defer func() {
		if err != nil {
			// On a dead connection the rollback fails too; the server
			// rolls the transaction back when the backend ends.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	now := h.s.now()
	pk := h.s.PK(key)
	if c := steprec.ClaimFrom(ctx, h.s); c != nil {
		return c.Completing(func() (bool, error) { return h.completeClaim(ctx, tx, c, pk, msg) })
	}
	tag, err := tx.Exec(ctx, insertCompletedSQL, pk, fp, now.Add(h.s.ttl))
	if err != nil {
		return fmt.Errorf("dedupepg: dedupe row: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if err := h.takeOver(ctx, tx, key, pk, fp, now); err != nil {
			return err
		}
	}
	if err := h.fn(ctx, tx, msg); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("dedupepg: commit: %w", err)
	}
	return nil
}

// insertCompletedSQL is the dedupe row of a message Transactional
// handles without a claim, for a key that has none: COMPLETED, with no
// lease, no steps and no token (only IN_PROGRESS claims are fenced by
// theirs, and a claim's token is never empty, so none matches a completed
// row's). Nothing is returned: a row written is the answer. A key that
// has a row, live or dead, writes nothing (DO NOTHING, which takes no
// lock and leaves the transaction without a write); then takeOver
// decides. An INSERT that meets a row another transaction is inserting
// waits for that transaction to end, as DO UPDATE does: when it commits,
// this one writes nothing; when it rolls back, this one writes the row.
const insertCompletedSQL = `INSERT INTO ` + table + ` (pk, status, token, fingerprint, expires_at)
VALUES ($1, 'COMPLETED', '', $2, $3)
ON CONFLICT (pk) DO NOTHING`

// completedSQL is upsert with status COMPLETED, as Transactional writes
// it without a claim (see insertCompletedSQL), run only when a row was
// there: it takes over a dead record (expired, or a lease-mode claim of
// the same body whose lease ended), judged under the row's lock on its
// latest version, so of concurrent takeovers one writes. A live record
// blocks it: no row is written.
const completedSQL = `INSERT INTO ` + table + ` AS d (pk, status, token, fingerprint, expires_at)
VALUES ($1, 'COMPLETED', '', $2, $3)
ON CONFLICT (pk) DO UPDATE
SET status = 'COMPLETED', token = '', fingerprint = excluded.fingerprint,
    lease_until = NULL, expires_at = excluded.expires_at, steps = NULL, unknown_step = NULL
WHERE d.expires_at < $4 OR (d.status = 'IN_PROGRESS' AND d.lease_until < $4
    AND (d.fingerprint = $2 OR d.fingerprint = '' OR $2 = ''))`

// completeClaim is the transaction of the final step of a handler under
// dedupe.Middleware with this store (c is its claim): the claim's record
// is completed first (fenced by its token, which locks the row), then fn
// runs, and both commit together. A record already completed by this
// token is a commit of an earlier attempt whose answer was lost: done. It
// reports whether it committed. A rollback is the caller's.
func (h *txHandler) completeClaim(ctx context.Context, tx pgx.Tx, c *steprec.Claim, pk string, msg *sqsmsg.Message) (bool, error) {
	tag, err := tx.Exec(ctx, completeSQL, pk, c.Token, h.s.now().Add(h.s.ttl))
	if err != nil {
		return false, fmt.Errorf("postgres: complete the dedupe row: %w", err)
	}
	if tag.RowsAffected() == 0 {
		r, found, err := read(ctx, tx, pk)
		if err != nil {
			return false, fmt.Errorf("postgres: complete the dedupe row: read: %w", err)
		}
		if found && r.token == c.Token && r.status == dedupe.StatusCompleted {
			// Nothing of this transaction is needed: end it.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
			return true, nil
		}
		return false, fmt.Errorf("postgres: complete the dedupe row: %w", dedupe.ErrNotOwner)
	}
	if err := h.fn(ctx, tx, msg); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("postgres: commit: %w", err)
	}
	return true, nil
}

// takeOver follows an INSERT of the dedupe row that wrote nothing (the
// key had a row): the row is read, and a live one answered (a duplicate,
// key reuse, a claim in progress) as before, with no more round trips
// than when the INSERT itself took over. A row dead by the store's clock,
// or gone since, is written by completedSQL, which judges the row again
// under its lock; when that writes nothing either, the row came alive
// meanwhile: conflict answers it.
func (h *txHandler) takeOver(ctx context.Context, tx pgx.Tx, key, pk, fp string, now time.Time) error {
	r, found, err := read(ctx, tx, pk)
	if err != nil {
		return fmt.Errorf("dedupepg: dedupe row: read: %w", err)
	}
	if found {
		if c, live := r.conflict(fp, now); live {
			return h.answer(key, fp, c, now)
		}
	}
	tag, err := tx.Exec(ctx, completedSQL, pk, fp, now.Add(h.s.ttl), now)
	switch {
	case err != nil:
		return fmt.Errorf("dedupepg: dedupe row: %w", err)
	case tag.RowsAffected() == 0:
		return h.conflict(ctx, tx, key, pk, fp, now)
	}
	return nil
}

// conflict answers a live record that blocked the dedupe row.
func (h *txHandler) conflict(ctx context.Context, tx pgx.Tx, key, pk, fp string, now time.Time) error {
	r, found, err := read(ctx, tx, pk)
	if err != nil {
		return fmt.Errorf("dedupepg: dedupe row: read: %w", err)
	}
	if !found {
		return errLost
	}
	c, live := r.conflict(fp, now)
	if !live {
		return errLost
	}
	return h.answer(key, fp, c, now)
}

// answer is the handler's answer for c, a live record of key judged at
// now.
func (h *txHandler) answer(key, fp string, c dedupe.Claim, now time.Time) error {
	switch c.Status {
	case dedupe.Duplicate:
		return duplicate(key)
	case dedupe.KeyReused:
		h.s.log.WithOptions(noStack).Error("dedupepg: KEY REUSE: the same dedupe key arrived with a different body; dead-lettering it",
			zap.String("dedupe_key", key), zap.String("fingerprint", fp), zap.String("stored_fingerprint", c.Fingerprint))
		return sqsmsg.Permanent(&dedupe.KeyReuseError{Key: key, Fingerprint: fp, Stored: c.Fingerprint})
	default:
		wait := max(c.LeaseUntil.Sub(now), time.Second)
		return sqsmsg.RetryAfter(&dedupe.InProgressError{Key: key, LeaseUntil: c.LeaseUntil}, wait)
	}
}

// completed reports whether key's dedupe row is COMPLETED, live by the
// store's clock and of fingerprint fp (the row the transaction would find
// and answer with a duplicate): one SELECT outside any transaction.
func (h *txHandler) completed(ctx context.Context, key, fp string) (bool, error) {
	r, found, err := read(ctx, h.s.db, h.s.PK(key))
	if err != nil || !found {
		return false, err
	}
	c, live := r.conflict(fp, h.s.now())
	return live && c.Status == dedupe.Duplicate, nil
}

// duplicate is the handler's answer for a key already completed.
func duplicate(key string) error { return &dedupe.DuplicateError{Key: key} }

// noStack keeps the stack trace a logger adds at error level (as
// zap.NewProduction's does) off a line that reports an outcome, such as
// key reuse: the library's own frames say nothing about its cause.
var noStack = zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false }))
