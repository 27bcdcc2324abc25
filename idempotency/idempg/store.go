package idempg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/internal/pgutil"
	"github.com/sqsonce/sqsonce/internal/steprec"
	"github.com/sqsonce/sqsonce/pgstore"
	"github.com/sqsonce/sqsonce/step"
)

// table is the idempotency table (pgstore.Idempotency's migrations
// create it).
const table = "sqsonce_idempotency"

// Config configures a [Store].
type Config struct {
	// DB is the pool (*pgxpool.Pool). Required.
	DB pgstore.DB
	// TTL is how long a record lives after its last write. Defaults to
	// idempotency.DefaultTTL (24 hours).
	TTL time.Duration
	// TxOptions are the options of the transactions [Store.BeginTx]
	// opens for the middleware's transactional mode, chiefly the isolation
	// level: READ COMMITTED, REPEATABLE READ and SERIALIZABLE all work (see
	// the package doc). The transaction's first statement claims the key,
	// so a handler cannot change its level with SET TRANSACTION: set it
	// here. Defaults to the server's default (READ COMMITTED, read-write);
	// a read-only mode is refused, as the record is written in it.
	TxOptions pgx.TxOptions
	// NowFunc is the clock for leases and expiry. Defaults to time.Now.
	NowFunc func() time.Time
}

// Store is the PostgreSQL [idempotency.Store]: one row per record key,
// claimed with INSERT ... ON CONFLICT DO UPDATE and fenced by the claim's
// token.
type Store struct {
	db     pgstore.DB
	ttl    time.Duration
	txOpts pgx.TxOptions
	now    func() time.Time
}

var _ idempotency.Store = (*Store)(nil)

// New returns a Store. It makes no call: the table must exist (see
// pgstore.Migrate with pgstore.Idempotency).
func New(cfg Config) (*Store, error) {
	if cfg.DB == nil {
		return nil, errors.New("idempg: Config.DB is required")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("idempg: Config.TTL %s is negative", cfg.TTL)
	}
	if cfg.TxOptions.AccessMode == pgx.ReadOnly {
		return nil, errors.New("idempg: Config.TxOptions.AccessMode is read-only: the request's transaction writes the idempotency record (leave it empty or set pgx.ReadWrite)")
	}
	s := &Store{db: cfg.DB, ttl: cmp.Or(cfg.TTL, idempotency.DefaultTTL), txOpts: cfg.TxOptions, now: cfg.NowFunc}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// upsert writes an IN_PROGRESS record when there is no live one: none, an
// expired one, or an IN_PROGRESS one of the same fingerprint whose lease
// has ended ($6 is the store's now). It returns the token written, or no
// row when a live record blocks it. A takeover keeps the steps the
// record holds (RETURNING gives them); an expired record's are dropped.
const upsert = `INSERT INTO ` + table + ` AS d (key, status, token, fingerprint, lease_until, expires_at)
VALUES ($1, 'IN_PROGRESS', $2, $3, $4, $5)
ON CONFLICT (key) DO UPDATE
SET status = excluded.status, token = excluded.token, fingerprint = excluded.fingerprint,
    lease_until = excluded.lease_until, expires_at = excluded.expires_at,
    response_status = NULL, response_header = NULL, response_body = NULL,
    steps = CASE WHEN d.expires_at < $6 THEN NULL ELSE d.steps END,
    unknown_step = CASE WHEN d.expires_at < $6 THEN NULL ELSE d.unknown_step END
WHERE d.expires_at < $6 OR (d.status = 'IN_PROGRESS' AND d.lease_until < $6 AND d.fingerprint = $3)
RETURNING d.token, d.steps`

const selectRecord = `SELECT status, fingerprint, lease_until, expires_at, response_status, response_header, response_body
FROM ` + table + ` WHERE key = $1`

// querier is a DB or a pgx.Tx.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// read returns the record of key; found=false when there is none.
func read(ctx context.Context, q querier, key string) (r record, found bool, err error) {
	err = q.QueryRow(ctx, selectRecord, key).Scan(&r.status, &r.fingerprint, &r.leaseUntil, &r.expiresAt, &r.respStatus, &r.respHeader, &r.respBody)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

type record struct {
	status      string
	fingerprint string
	leaseUntil  *time.Time
	expiresAt   time.Time
	respStatus  *int32
	respHeader  http.Header
	respBody    []byte
}

// Claim implements [idempotency.Store].
func (s *Store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (idempotency.Claim, error) {
	for attempt := 0; ; attempt++ {
		now := s.now()
		c, decided, err := s.claimOnce(ctx, s.db, key, fingerprint, now, now.Add(lease))
		if err != nil || decided {
			return c, err
		}
		if attempt >= 2 {
			return idempotency.Claim{Status: idempotency.InProgress, LeaseUntil: now.Add(time.Second)}, nil
		}
	}
}

// claimOnce tries once, at now, to write an IN_PROGRESS record for key
// with its lease ending at until, through q (the pool, or a request's
// transaction). It answers Claimed, or what the live record that blocked
// the write says; decided=false when neither (the record changed between
// the write and the read, or is dead by our clock): claim again, or
// report the key busy. A claim that takes a record over gets its steps.
func (s *Store) claimOnce(ctx context.Context, q querier, key, fingerprint string, now, until time.Time) (c idempotency.Claim, decided bool, err error) {
	token := leasekey.NewToken()
	var (
		got      string
		rawSteps []byte
	)
	err = q.QueryRow(ctx, upsert, key, token, fingerprint, until, now.Add(s.ttl), now).Scan(&got, &rawSteps)
	if err == nil {
		steps, err := steprec.Decode(rawSteps)
		if err != nil {
			return idempotency.Claim{}, false, fmt.Errorf("idempg: claim: %w", err)
		}
		return idempotency.Claim{Status: idempotency.Claimed, Token: token, LeaseUntil: until, Steps: steps}, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Claim{}, false, fmt.Errorf("idempg: claim: %w", err)
	}
	r, found, err := read(ctx, q, key)
	if err != nil {
		return idempotency.Claim{}, false, fmt.Errorf("idempg: claim: read: %w", err)
	}
	if found {
		if c, live := r.conflict(fingerprint, now); live {
			return c, true, nil
		}
	}
	return idempotency.Claim{}, false, nil
}

// conflict turns the record that blocked a claim into the claim's answer.
// live=false means the record is dead by our clock after all (it changed
// between the write and the read): claim again. A lease that ended frees
// the key for the same request only: another fingerprint is key reuse
// until the record expires.
func (r record) conflict(fingerprint string, now time.Time) (c idempotency.Claim, live bool) {
	if r.expiresAt.Before(now) {
		return c, false
	}
	c.Fingerprint = r.fingerprint
	switch {
	case r.fingerprint != fingerprint:
		c.Status = idempotency.KeyReused
	case r.status == idempotency.StatusCompleted:
		c.Status = idempotency.Completed
		// A completed row always has a body, empty or not; NULL marks one
		// that was not retained.
		c.Response = &idempotency.Response{Header: r.respHeader, Body: r.respBody, NotRetained: r.respBody == nil}
		if r.respStatus != nil {
			c.Response.Status = int(*r.respStatus)
		}
	case r.leaseUntil == nil || r.leaseUntil.Before(now):
		return idempotency.Claim{}, false
	default:
		c.Status = idempotency.InProgress
		c.LeaseUntil = *r.leaseUntil
	}
	return c, true
}

func fenced(op string, tag pgconn.CommandTag, err error) error {
	return pgutil.Fenced("idempg", op, tag, err, idempotency.ErrNotOwner)
}

// Extend implements [idempotency.Store].
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	now := s.now()
	tag, err := s.db.Exec(ctx, `UPDATE `+table+` SET lease_until = $3, expires_at = $4
		WHERE key = $1 AND token = $2 AND status = 'IN_PROGRESS'`, key, token, now.Add(lease), now.Add(s.ttl))
	return fenced("extend", tag, err)
}

// execer is a DB or a pgx.Tx.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (s *Store) complete(ctx context.Context, db execer, key, token string, resp idempotency.Response) error {
	header := resp.Header
	if header == nil {
		header = http.Header{}
	}
	body := resp.Body
	switch {
	case resp.NotRetained:
		body = nil // stored as NULL: the mark
	case body == nil:
		body = []byte{}
	}
	tag, err := db.Exec(ctx, `UPDATE `+table+` SET status = 'COMPLETED', lease_until = NULL, expires_at = $3,
		response_status = $4, response_header = $5, response_body = $6
		WHERE key = $1 AND token = $2 AND status = 'IN_PROGRESS'`, key, token, s.now().Add(s.ttl), resp.Status, header, body)
	return fenced("complete", tag, err)
}

// Complete implements [idempotency.Store]. It stores the response; it
// commits no work attached to the request (Completion.Work, such as
// idemdynamo.Transact's DynamoDB writes), and answers
// [idempotency.ErrWorkUnsupported] when given some. To commit the
// response with SQL work, see [Store.BeginTx] and [Store.CompleteTx].
func (s *Store) Complete(ctx context.Context, key, token string, c idempotency.Completion) error {
	if len(c.Work) > 0 {
		return idempotency.ErrWorkUnsupported
	}
	return s.complete(ctx, s.db, key, token, c.Response)
}

// CompleteTx completes the claim holding token with resp inside tx, the
// transaction holding the request's work: when tx commits, the work and
// the stored response are durable together; when it rolls back, neither
// is, and the claim stays IN_PROGRESS (release it, or let its lease end).
// It returns an error wrapping [idempotency.ErrNotOwner] when the claim
// was lost: roll tx back then, the key belongs to another request.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, key, token string, resp idempotency.Response) error {
	return s.complete(ctx, tx, key, token, resp)
}

// releaseSQL deletes the claim, or, when its record holds steps, keeps it
// with its lease ended ($3) and its token retired ($4): one of the two
// statements matches.
const releaseSQL = `WITH kept AS (
	UPDATE ` + table + ` SET lease_until = $3, token = $4
	WHERE key = $1 AND token = $2 AND status = 'IN_PROGRESS' AND steps IS NOT NULL RETURNING 1
), gone AS (
	DELETE FROM ` + table + ` WHERE key = $1 AND token = $2 AND status = 'IN_PROGRESS' AND steps IS NULL RETURNING 1
) SELECT (SELECT count(*) FROM kept) + (SELECT count(*) FROM gone)`

// saveStepsSQL writes the steps of the claim holding token.
const saveStepsSQL = `UPDATE ` + table + ` SET steps = $3, unknown_step = $4, expires_at = $5
WHERE key = $1 AND token = $2 AND status = 'IN_PROGRESS'`

// releasedLease is the lease_until of a record released with its steps:
// long ended.
var releasedLease = time.Unix(0, 0).UTC()

// Release implements [idempotency.Store]: one statement, which deletes
// the claim, or keeps a record that holds steps with its lease ended.
func (s *Store) Release(ctx context.Context, key, token string) error {
	var n int64
	err := s.db.QueryRow(ctx, releaseSQL, key, token, releasedLease, leasekey.NewToken()).Scan(&n)
	return fenced("release", pgconn.NewCommandTag(fmt.Sprintf("DELETE %d", n)), err)
}

var _ idempotency.StepStore = (*Store)(nil)

// SaveSteps implements [idempotency.StepStore]: one UPDATE fenced by the
// token (the steps are written whole, as jsonb).
func (s *Store) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	b, err := steprec.Encode(steps)
	if err != nil {
		return fmt.Errorf("idempg: save steps: %w", err)
	}
	tag, err := s.db.Exec(ctx, saveStepsSQL, key, token, b, nullIfEmpty(steprec.UnknownStep(steps)), s.now().Add(s.ttl))
	return fenced("save steps", tag, err)
}

// nullIfEmpty is nil for "", else s.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Unknown implements [idempotency.StepStore]: one SELECT on the partial
// index of unknown_step.
func (s *Store) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	now := s.now()
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := s.db.Query(ctx, `SELECT key, status, lease_until, unknown_step, steps FROM `+table+`
		WHERE unknown_step IS NOT NULL AND expires_at >= $1 ORDER BY key LIMIT $2`, now, lim)
	if err != nil {
		return nil, fmt.Errorf("idempg: unknown steps: %w", err)
	}
	defer rows.Close()
	var out []step.Unresolved
	for rows.Next() {
		var (
			key, status, name string
			leaseUntil        *time.Time
			raw               []byte
		)
		if err := rows.Scan(&key, &status, &leaseUntil, &name, &raw); err != nil {
			return nil, fmt.Errorf("idempg: unknown steps: %w", err)
		}
		steps, err := steprec.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("idempg: unknown steps: %w", err)
		}
		out = append(out, step.Unresolved{
			Key: key, Step: name, Record: steps[name],
			Held: status == idempotency.StatusInProgress && leaseUntil != nil && !leaseUntil.Before(now),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("idempg: unknown steps: %w", err)
	}
	return out, nil
}

// Resolve implements [idempotency.StepStore]: in one transaction, the row
// locked (SELECT ... FOR UPDATE), judged, and updated.
func (s *Store) Resolve(ctx context.Context, key, name string, applied bool) error {
	return pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var (
			status, token string
			leaseUntil    *time.Time
			expiresAt     time.Time
			raw           []byte
		)
		err := tx.QueryRow(ctx, `SELECT status, token, lease_until, expires_at, steps FROM `+table+` WHERE key = $1 FOR UPDATE`, key).
			Scan(&status, &token, &leaseUntil, &expiresAt, &raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("idempg: resolve %q: %w", name, step.ErrNotUnknown)
		}
		if err != nil {
			return fmt.Errorf("idempg: resolve: read: %w", err)
		}
		steps, err := steprec.Decode(raw)
		if err != nil {
			return fmt.Errorf("idempg: resolve: %w", err)
		}
		now := s.now()
		if status != idempotency.StatusInProgress || expiresAt.Before(now) || !step.Resolvable(steps[name]) {
			return fmt.Errorf("idempg: resolve %q: %w", name, step.ErrNotUnknown)
		}
		if leaseUntil != nil && !leaseUntil.Before(now) {
			return fmt.Errorf("idempg: resolve %q: %w", name, step.ErrHeld)
		}
		res := step.Resolution(steps[name], applied)
		res.At = now.UTC()
		steps[name] = res
		b, err := steprec.Encode(steps)
		if err != nil {
			return fmt.Errorf("idempg: resolve: %w", err)
		}
		if _, err := tx.Exec(ctx, saveStepsSQL, key, token, b, nullIfEmpty(steprec.UnknownStep(steps)), now.Add(s.ttl)); err != nil {
			return fmt.Errorf("idempg: resolve: %w", err)
		}
		return nil
	})
}

var _ idempotency.Lookuper = (*Store)(nil)

// Lookup implements [idempotency.Lookuper] with one SELECT.
func (s *Store) Lookup(ctx context.Context, key string) (idempotency.Record, error) {
	var r record
	var raw []byte
	err := s.db.QueryRow(ctx, `SELECT status, fingerprint, lease_until, expires_at, response_status, response_header, response_body, steps
		FROM `+table+` WHERE key = $1`, key).Scan(&r.status, &r.fingerprint, &r.leaseUntil, &r.expiresAt, &r.respStatus, &r.respHeader, &r.respBody, &raw)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && r.expiresAt.Before(s.now())) {
		return idempotency.Record{}, idempotency.ErrNoRecord
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("idempg: lookup: %w", err)
	}
	steps, err := steprec.Decode(raw)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("idempg: lookup: %w", err)
	}
	rec := idempotency.Record{Status: r.status, Fingerprint: r.fingerprint, ExpiresAt: r.expiresAt, Steps: steps}
	if r.status == idempotency.StatusCompleted {
		// As Claim reads it: a NULL body marks a response not retained.
		rec.Response = &idempotency.Response{Header: r.respHeader, Body: r.respBody, NotRetained: r.respBody == nil}
		if r.respStatus != nil {
			rec.Response.Status = int(*r.respStatus)
		}
	} else if r.leaseUntil != nil {
		rec.LeaseUntil = *r.leaseUntil
	}
	return rec, nil
}

// Table returns the table the store uses, sqsonce_idempotency, in the
// connection's current schema.
func (s *Store) Table() string { return table }

// Check verifies at start-up that the idempotency table is there and
// readable, with an error that says what to fix.
func (s *Store) Check(ctx context.Context) error {
	return pgutil.CheckTables(ctx, s.db, "idempg", "pgstore.Migrate(ctx, pool, pgstore.Idempotency)", table)
}

// Prune deletes expired records (expires_at before the store's now), in
// batches of opts.BatchSize rows, each its own transaction, until none is
// left or opts.MaxBatches ran, and returns how many it deleted. It is safe
// from several processes at once (SKIP LOCKED); schedule it hourly. An
// expired record is dead for Claim whether or not it was pruned.
func (s *Store) Prune(ctx context.Context, opts pgstore.PruneOptions) (int, error) {
	now := s.now()
	return pgutil.Prune(ctx, opts.BatchSize, opts.MaxBatches, func(ctx context.Context, batch int) (int, error) {
		tag, err := s.db.Exec(ctx, `DELETE FROM `+table+` WHERE key IN (
			SELECT key FROM `+table+` WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED) AND expires_at < $1`, now, batch)
		if err != nil {
			return 0, fmt.Errorf("idempg: prune: %w", err)
		}
		return int(tag.RowsAffected()), nil
	})
}
