package limitpg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/internal/pgutil"
	"github.com/sqsonce/sqsonce/limit"
	"github.com/sqsonce/sqsonce/pgstore"
)

// The tables pgstore.Migrate creates with pgstore.Limits.
const (
	ratesTable = "sqsonce_limit_rates"
	slotsTable = "sqsonce_limit_slots"
)

// maxTries bounds the tries of one Acquire that lose a race to another
// worker's.
const maxTries = 8

// Config configures a [Store].
type Config struct {
	// DB is the pool (*pgxpool.Pool). Required.
	DB pgstore.DB
	// NowFunc is the clock (never the server's now(): every worker judges
	// its slots by the clock it spends them with, so the workers' clocks
	// must agree, as NTP keeps them). Defaults to time.Now.
	NowFunc func() time.Time
	// Logger receives warnings. Defaults to zap.NewNop().
	Logger *zap.Logger
}

// Store is the PostgreSQL [limit.Store]: one row per rate in
// sqsonce_limit_rates, one per slot held in sqsonce_limit_slots.
type Store struct {
	db  pgstore.DB
	now func() time.Time
	log *zap.Logger
}

var _ limit.Store = (*Store)(nil)

// New returns a Store. It makes no call: the tables must exist (see
// pgstore.Migrate with pgstore.Limits); run [Store.Check] at start-up.
func New(cfg Config) (*Store, error) {
	if cfg.DB == nil {
		return nil, errors.New("limitpg: Config.DB is required (a *pgxpool.Pool)")
	}
	s := &Store{db: cfg.DB, now: cfg.NowFunc, log: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	return s, nil
}

// Check verifies at start-up that the tables exist, with an error that
// says what to run.
func (s *Store) Check(ctx context.Context) error {
	return pgutil.CheckTables(ctx, s.db, "limitpg", "pgstore.Migrate(ctx, pool, pgstore.Limits)", ratesTable, slotsTable)
}

const reserveSQL = `INSERT INTO ` + ratesTable + ` AS r (pk, next_ns) VALUES ($1, $2::bigint + $4::bigint)
ON CONFLICT (pk) DO UPDATE SET next_ns = greatest(r.next_ns, $2::bigint) + $4::bigint
WHERE greatest(r.next_ns, $2::bigint) <= $3::bigint
RETURNING next_ns`

// Reserve implements [limit.RateStore] with one statement: the block is
// added to the timeline under the row's lock, the timeline restarted at
// now − Burst when it fell behind, and nothing leased when it starts past
// now + Ahead (a second statement then reads where it ends).
func (s *Store) Reserve(ctx context.Context, name string, req limit.RateRequest) (limit.RateLease, error) {
	if err := req.Check(); err != nil {
		return limit.RateLease{}, fmt.Errorf("limitpg: %w", err)
	}
	pk := leasekey.TextPK("rate", name)
	now := s.now()
	d := int64(time.Duration(req.N) * req.Every)
	var next int64
	err := s.db.QueryRow(ctx, reserveSQL, pk, now.Add(-req.Burst).UnixNano(), now.Add(req.Ahead).UnixNano(), d).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		if err := s.db.QueryRow(ctx, `SELECT next_ns FROM `+ratesTable+` WHERE pk = $1`, pk).Scan(&next); err != nil {
			return limit.RateLease{}, fmt.Errorf("limitpg: reserve %q: %w", name, err)
		}
		return limit.RateLease{Next: time.Unix(0, next)}, nil
	}
	if err != nil {
		return limit.RateLease{}, fmt.Errorf("limitpg: reserve %q: %w", name, err)
	}
	end := time.Unix(0, next)
	return limit.RateLease{From: end.Add(-time.Duration(d)), N: req.N, Next: end}, nil
}

// acquireSQL takes the lowest slot of the key that is free (no row, or an
// expired one) with one statement. Two workers that pick the same slot
// meet in ON CONFLICT: the second waits for the first's row, finds it held
// (the WHERE is judged on the row as the first left it) and gets no row.
const acquireSQL = `INSERT INTO ` + slotsTable + ` AS s (pk, slot, holder, expires_at)
SELECT $1, g, $2, $3 FROM generate_series(0, $4::integer - 1) g
WHERE NOT EXISTS (SELECT 1 FROM ` + slotsTable + ` x WHERE x.pk = $1 AND x.slot = g AND x.expires_at > $5)
ORDER BY g LIMIT 1
ON CONFLICT (pk, slot) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE s.expires_at <= $5
RETURNING slot`

const heldSQL = `SELECT count(*) FROM ` + slotsTable + ` WHERE pk = $1 AND slot < $2 AND expires_at > $3`

// Acquire implements [limit.SlotStore]: one statement, and when it takes
// no slot, one count to tell a full key from a race lost to another
// worker (then it tries again). Slots are numbered 0 to limit − 1: a
// limit lowered while the slots above it are held lets their holders
// finish.
func (s *Store) Acquire(ctx context.Context, sl limit.Slot, limitN int, ttl time.Duration) (bool, error) {
	if err := sl.Check(limitN); err != nil {
		return false, fmt.Errorf("limitpg: %w", err)
	}
	pk := pkOf(sl)
	for range maxTries {
		now := s.now()
		var slot int
		err := s.db.QueryRow(ctx, acquireSQL, pk, sl.Holder, now.Add(ttl), limitN, now).Scan(&slot)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return false, fmt.Errorf("limitpg: acquire a slot: %w", err)
		}
		var held int
		if err := s.db.QueryRow(ctx, heldSQL, pk, limitN, now).Scan(&held); err != nil {
			return false, fmt.Errorf("limitpg: acquire a slot: %w", err)
		}
		if held >= limitN {
			return false, nil
		}
	}
	return false, fmt.Errorf("limitpg: acquire a slot: lost the race to other workers %d times", maxTries)
}

// Extend implements [limit.SlotStore].
func (s *Store) Extend(ctx context.Context, sl limit.Slot, ttl time.Duration) error {
	tag, err := s.db.Exec(ctx, `UPDATE `+slotsTable+` SET expires_at = $3 WHERE pk = $1 AND holder = $2`, pkOf(sl), sl.Holder, s.now().Add(ttl))
	if err != nil {
		return fmt.Errorf("limitpg: extend a slot: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("limitpg: extend a slot: %w", limit.ErrLost)
	}
	return nil
}

// Release implements [limit.SlotStore].
func (s *Store) Release(ctx context.Context, sl limit.Slot) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM `+slotsTable+` WHERE pk = $1 AND holder = $2`, pkOf(sl), sl.Holder); err != nil {
		return fmt.Errorf("limitpg: release a slot: %w", err)
	}
	return nil
}

func pkOf(sl limit.Slot) string { return leasekey.TextPK("slots#"+sl.Name, sl.Key) }
