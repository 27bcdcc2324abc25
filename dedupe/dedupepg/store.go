package dedupepg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/internal/pgutil"
	"github.com/sqsonce/sqsonce/internal/steprec"
	"github.com/sqsonce/sqsonce/pgstore"
	"github.com/sqsonce/sqsonce/step"
)

// table is the dedupe table (pgstore.Dedupe's migrations create it).
const table = "sqsonce_dedupe"

// Config configures a [Store].
type Config struct {
	// DB is the pool (*pgxpool.Pool). Required.
	DB pgstore.DB
	// Namespace prefixes every key: use one per consumer (the queue name is
	// a good choice), so queues fed the same ids dedupe separately.
	// Required.
	Namespace string
	// TTL is how long a record lives after its last write (its
	// expires_at). Defaults to dedupe.DefaultTTL (30 days): longer than a
	// message's 14-day maximum retention plus a redrive's fresh 14 days.
	TTL time.Duration
	// NowFunc is the clock used for leases and expiry (never the server's
	// now(), so that every worker judges by the clock it leases with).
	// Defaults to time.Now.
	NowFunc func() time.Time
	// Logger receives key reuse (error) and retried transactions (warn).
	// Defaults to zap.NewNop().
	Logger *zap.Logger
}

// Store is the PostgreSQL [dedupe.Store]: one row per key in
// sqsonce_dedupe, claimed with INSERT ... ON CONFLICT DO UPDATE and fenced
// by the claim's token.
type Store struct {
	db  pgstore.DB
	ns  string
	ttl time.Duration
	now func() time.Time
	log *zap.Logger
}

var _ dedupe.StepStore = (*Store)(nil)

// New returns a Store. It makes no call: the table must exist (see
// pgstore.Migrate with pgstore.Dedupe).
func New(cfg Config) (*Store, error) {
	if cfg.DB == nil {
		return nil, errors.New("dedupepg: Config.DB is required")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("dedupepg: Config.Namespace is required (one per consumer, e.g. the queue name)")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("dedupepg: Config.TTL %s is negative", cfg.TTL)
	}
	s := &Store{db: cfg.DB, ns: cfg.Namespace, ttl: cmp.Or(cfg.TTL, dedupe.DefaultTTL), now: cfg.NowFunc, log: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	return s, nil
}

// Table returns the table the store uses, sqsonce_dedupe, in the
// connection's current schema.
func (s *Store) Table() string { return table }

// PK returns the stored primary key of a message key.
func (s *Store) PK(key string) string { return leasekey.PK(s.ns, key) }

// Check verifies at start-up that the dedupe table is there and readable,
// with an error that says what to fix.
func (s *Store) Check(ctx context.Context) error {
	return pgutil.CheckTables(ctx, s.db, "dedupepg", "pgstore.Migrate(ctx, pool, pgstore.Dedupe)", table)
}

// upsert writes a record when there is no live one: none, an expired one,
// or an IN_PROGRESS one of the same fingerprint ($4; an empty one matches
// any) whose lease has ended ($7 is the store's now). It returns the token
// written, or no row when a live record blocks it.
//
// A takeover keeps the steps the record holds (RETURNING gives them); an
// expired record's are dropped. A COMPLETED write ($2, the transactional
// mode) drops them too: the message is done.
const upsert = `INSERT INTO ` + table + ` AS d (pk, status, token, fingerprint, lease_until, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (pk) DO UPDATE
SET status = excluded.status, token = excluded.token, fingerprint = excluded.fingerprint,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    steps = CASE WHEN d.expires_at < $7 OR excluded.status = 'COMPLETED' THEN NULL ELSE d.steps END,
    unknown_step = CASE WHEN d.expires_at < $7 OR excluded.status = 'COMPLETED' THEN NULL ELSE d.unknown_step END
WHERE d.expires_at < $7 OR (d.status = 'IN_PROGRESS' AND d.lease_until < $7
    AND (d.fingerprint = $4 OR d.fingerprint = '' OR $4 = ''))
RETURNING d.token, d.steps`

const selectRecord = `SELECT status, token, fingerprint, lease_until, expires_at, steps FROM ` + table + ` WHERE pk = $1`

// querier is a DB or a pgx.Tx.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// record is a row as read back.
type record struct {
	status      string
	token       string
	fingerprint string
	leaseUntil  *time.Time
	expiresAt   time.Time
	steps       []byte // jsonb, nil for none
}

// read returns the record of pk; found=false when there is none.
func read(ctx context.Context, q querier, pk string) (r record, found bool, err error) {
	err = q.QueryRow(ctx, selectRecord, pk).Scan(&r.status, &r.token, &r.fingerprint, &r.leaseUntil, &r.expiresAt, &r.steps)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// conflict turns the record that blocked a write into the claim's answer.
// live=false means the record is dead by our clock after all (it changed
// between the write and the read): write again. A lease that ended frees
// the key for the same fingerprint only: another is key reuse until the
// record expires.
func (r record) conflict(fingerprint string, now time.Time) (c dedupe.Claim, live bool) {
	if r.expiresAt.Before(now) {
		return dedupe.Claim{}, false
	}
	c.Fingerprint = r.fingerprint
	switch {
	case r.fingerprint != "" && fingerprint != "" && r.fingerprint != fingerprint:
		c.Status = dedupe.KeyReused
	case r.status == dedupe.StatusCompleted:
		c.Status = dedupe.Duplicate
	case r.leaseUntil == nil || r.leaseUntil.Before(now):
		return dedupe.Claim{}, false
	default:
		c.Status = dedupe.InProgress
		c.LeaseUntil = *r.leaseUntil
	}
	return c, true
}

// Claim implements [dedupe.Store]: one INSERT ... ON CONFLICT DO UPDATE
// that takes the key when no live record holds it, then, when one does, a
// read of that record.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (dedupe.Claim, error) {
	pk := s.PK(key)
	for attempt := 0; ; attempt++ {
		now := s.now()
		token := leasekey.NewToken()
		until := now.Add(lease)
		var (
			got      string
			rawSteps []byte
		)
		err := s.db.QueryRow(ctx, upsert, pk, dedupe.StatusInProgress, token, fingerprint, until, now.Add(s.ttl), now).Scan(&got, &rawSteps)
		if err == nil {
			steps, err := steprec.Decode(rawSteps)
			if err != nil {
				return dedupe.Claim{}, fmt.Errorf("dedupepg: claim: %w", err)
			}
			return dedupe.Claim{Status: dedupe.Claimed, Token: token, LeaseUntil: until, Steps: steps}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return dedupe.Claim{}, fmt.Errorf("dedupepg: claim: %w", err)
		}
		r, found, err := read(ctx, s.db, pk)
		if err != nil {
			return dedupe.Claim{}, fmt.Errorf("dedupepg: claim: read: %w", err)
		}
		if found {
			if c, live := r.conflict(fingerprint, now); live {
				return c, nil
			}
		}
		if attempt >= 2 {
			// Released or expired three times in a row between our write
			// and our read: report the key busy for a moment.
			return dedupe.Claim{Status: dedupe.InProgress, LeaseUntil: now.Add(time.Second)}, nil
		}
	}
}

// Fenced statements: the claim holding token, IN_PROGRESS.
const (
	extendSQL = `UPDATE ` + table + ` SET lease_until = $3, expires_at = $4
WHERE pk = $1 AND token = $2 AND status = 'IN_PROGRESS'`
	completeSQL = `UPDATE ` + table + ` SET status = 'COMPLETED', lease_until = NULL, expires_at = $3
WHERE pk = $1 AND token = $2 AND status = 'IN_PROGRESS'`
	// releaseSQL deletes the claim, or, when its record holds steps,
	// keeps it with its lease ended ($3) and its token retired ($4): one
	// of the two statements matches.
	releaseSQL = `WITH kept AS (
	UPDATE ` + table + ` SET lease_until = $3, token = $4
	WHERE pk = $1 AND token = $2 AND status = 'IN_PROGRESS' AND steps IS NOT NULL RETURNING 1
), gone AS (
	DELETE FROM ` + table + ` WHERE pk = $1 AND token = $2 AND status = 'IN_PROGRESS' AND steps IS NULL RETURNING 1
) SELECT (SELECT count(*) FROM kept) + (SELECT count(*) FROM gone)`
	saveStepsSQL = `UPDATE ` + table + ` SET steps = $3, unknown_step = $4, expires_at = $5
WHERE pk = $1 AND token = $2 AND status = 'IN_PROGRESS'`
)

// releasedLease is the lease_until of a record released with its steps:
// long ended.
var releasedLease = time.Unix(0, 0).UTC()

func fenced(op string, tag pgconn.CommandTag, err error) error {
	return pgutil.Fenced("dedupepg", op, tag, err, dedupe.ErrNotOwner)
}

// Extend implements [dedupe.Store].
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	now := s.now()
	tag, err := s.db.Exec(ctx, extendSQL, s.PK(key), token, now.Add(lease), now.Add(s.ttl))
	return fenced("extend", tag, err)
}

// Complete implements [dedupe.Store].
func (s *Store) Complete(ctx context.Context, key, token string) error {
	tag, err := s.db.Exec(ctx, completeSQL, s.PK(key), token, s.now().Add(s.ttl))
	return fenced("complete", tag, err)
}

// Release implements [dedupe.Store]: one statement, which deletes the
// claim, or keeps a record that holds steps with its lease ended.
func (s *Store) Release(ctx context.Context, key, token string) error {
	var n int64
	err := s.db.QueryRow(ctx, releaseSQL, s.PK(key), token, releasedLease, leasekey.NewToken()).Scan(&n)
	return fenced("release", pgconn.NewCommandTag(fmt.Sprintf("DELETE %d", n)), err)
}

// SaveSteps implements [dedupe.StepStore]: one UPDATE fenced by the token
// (the steps are written whole, as jsonb).
func (s *Store) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	b, err := steprec.Encode(steps)
	if err != nil {
		return fmt.Errorf("dedupepg: save steps: %w", err)
	}
	tag, err := s.db.Exec(ctx, saveStepsSQL, s.PK(key), token, b, nullIfEmpty(steprec.UnknownStep(steps)), s.now().Add(s.ttl))
	return fenced("save steps", tag, err)
}

// nullIfEmpty is nil for "", else s.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Unknown implements [dedupe.StepStore]: one SELECT in the store's
// namespace, which reads through the table's BRIN index the block ranges
// that hold (or once held) a step of unknown outcome, and those not yet
// summarized.
func (s *Store) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	now := s.now()
	prefix := s.ns + "#"
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := s.db.Query(ctx, `SELECT pk, status, lease_until, unknown_step, steps FROM `+table+`
		WHERE unknown_step IS NOT NULL AND starts_with(pk, $1) AND expires_at >= $2 ORDER BY pk LIMIT $3`, prefix, now, lim)
	if err != nil {
		return nil, fmt.Errorf("dedupepg: unknown steps: %w", err)
	}
	defer rows.Close()
	var out []step.Unresolved
	for rows.Next() {
		var (
			pk, status, name string
			leaseUntil       *time.Time
			raw              []byte
		)
		if err := rows.Scan(&pk, &status, &leaseUntil, &name, &raw); err != nil {
			return nil, fmt.Errorf("dedupepg: unknown steps: %w", err)
		}
		steps, err := steprec.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("dedupepg: unknown steps: %s: %w", pk, err)
		}
		out = append(out, step.Unresolved{
			Key: strings.TrimPrefix(pk, prefix), Step: name, Record: steps[name],
			Held: status == dedupe.StatusInProgress && leaseUntil != nil && !leaseUntil.Before(now),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dedupepg: unknown steps: %w", err)
	}
	return out, nil
}

// Resolve implements [dedupe.StepStore]: in one transaction, the row
// locked (SELECT ... FOR UPDATE), judged, and updated.
func (s *Store) Resolve(ctx context.Context, key, name string, applied bool) error {
	pk := s.PK(key)
	return pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var r record
		err := tx.QueryRow(ctx, selectRecord+` FOR UPDATE`, pk).Scan(&r.status, &r.token, &r.fingerprint, &r.leaseUntil, &r.expiresAt, &r.steps)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("dedupepg: resolve %q: %w", name, step.ErrNotUnknown)
		}
		if err != nil {
			return fmt.Errorf("dedupepg: resolve: read: %w", err)
		}
		steps, err := steprec.Decode(r.steps)
		if err != nil {
			return fmt.Errorf("dedupepg: resolve: %w", err)
		}
		now := s.now()
		if r.status != dedupe.StatusInProgress || r.expiresAt.Before(now) || !step.Resolvable(steps[name]) {
			return fmt.Errorf("dedupepg: resolve %q: %w", name, step.ErrNotUnknown)
		}
		if r.leaseUntil != nil && !r.leaseUntil.Before(now) {
			return fmt.Errorf("dedupepg: resolve %q: %w", name, step.ErrHeld)
		}
		res := step.Resolution(steps[name], applied)
		res.At = now.UTC()
		steps[name] = res
		b, err := steprec.Encode(steps)
		if err != nil {
			return fmt.Errorf("dedupepg: resolve: %w", err)
		}
		if _, err := tx.Exec(ctx, saveStepsSQL, pk, r.token, b, nullIfEmpty(steprec.UnknownStep(steps)), now.Add(s.ttl)); err != nil {
			return fmt.Errorf("dedupepg: resolve: %w", err)
		}
		return nil
	})
}
