package outboxpg

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/internal/partlease"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/pgstore"
)

// Tables the migrations of pgstore.Outbox create.
const (
	tableEvents   = "sqsonce_outbox"
	tableEntities = "sqsonce_outbox_entities"
	tableLeases   = "sqsonce_outbox_leases"
	tableRelays   = "sqsonce_outbox_relays"
)

// DefaultChannel is the channel every Store shared by default in earlier
// versions, whatever the schema.
//
// Deprecated: the default channel is now the Store's own (see
// Config.Channel). Set Config.Channel to DefaultChannel only while writers
// or relays of an earlier version still run against the same tables, so
// that they keep waking each other; polling covers the gap otherwise.
const DefaultChannel = "sqsonce_outbox"

// channelSQL is the default channel of the events table that the
// connection's search_path finds: its schema-qualified name
// ("<schema>.sqsonce_outbox"), or "sqsonce_outbox_" and the MD5 of that
// name when it is longer than a PostgreSQL name (63 bytes), which LISTEN
// would truncate and pg_notify refuse. NULL when there is no such table.
const channelSQL = `SELECT CASE WHEN octet_length(q) <= 63 THEN q ELSE 'sqsonce_outbox_' || md5(q) END
FROM (SELECT n.nspname || '.' || c.relname AS q
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = to_regclass('` + tableEvents + `')) AS t`

// maxChannel is the longest channel name PostgreSQL takes (NAMEDATALEN-1).
const maxChannel = 63

// Config configures a [Store].
type Config struct {
	// DB is the pool the relay side reads and writes with
	// (*pgxpool.Pool). Required.
	DB pgstore.DB
	// Partitions spread entities over relays. Every writer and relay of
	// the tables must use the same number; change it only with the outbox
	// empty. Defaults to 16.
	Partitions int
	// Lease is how long a relay holds its partitions without renewing
	// them: the time another relay waits to take over after a crash.
	// Defaults to 10s.
	Lease time.Duration
	// Channel is the LISTEN/NOTIFY channel: Put notifies it on commit, and
	// a [Listener] listens to it. At most 63 bytes. Defaults to the events
	// table's schema-qualified name as the connection's search_path finds
	// it, for example "public.sqsonce_outbox" (when that is longer than 63
	// bytes, "sqsonce_outbox_" and the MD5 hex of it), so that outboxes in
	// two schemas of one database do not wake each other's relays.
	Channel string
	// NowFunc is the clock for leases, retries and CreatedAt. Defaults to
	// time.Now.
	NowFunc func() time.Time
}

// Store is the PostgreSQL outbox: [Store.Put] writes events in the
// caller's transaction, and the Store is the [outbox.Store] a relay reads.
type Store struct {
	cfg Config

	leases partlease.Cache // owner → partitions held
	reads  readModes       // owner → DueRuns's next read
}

var _ outbox.RunStore = (*Store)(nil)

// New checks cfg and fills its defaults. It makes no call: the tables
// must exist (see pgstore.Migrate with pgstore.Outbox).
func New(cfg Config) (*Store, error) {
	if cfg.DB == nil {
		return nil, errors.New("outboxpg: Config.DB is required")
	}
	if cfg.Partitions < 0 || cfg.Partitions > 1000 || cfg.Lease < 0 {
		return nil, errors.New("outboxpg: Partitions must be between 1 and 1000, Lease not negative")
	}
	cfg.Partitions = cmp.Or(cfg.Partitions, 16)
	cfg.Lease = cmp.Or(cfg.Lease, 10*time.Second)
	if len(cfg.Channel) > maxChannel {
		return nil, fmt.Errorf("outboxpg: Config.Channel is %d bytes; PostgreSQL names hold at most %d (leave it empty for the table's own channel)", len(cfg.Channel), maxChannel)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &Store{cfg: cfg}, nil
}

// Table returns the table of the events, sqsonce_outbox, in the
// connection's current schema (the outbox's other tables are named after
// it: sqsonce_outbox_entities, sqsonce_outbox_leases,
// sqsonce_outbox_relays).
func (st *Store) Table() string { return tableEvents }

// entityKey is the stored key of an entity: itself, or its SHA-256 past
// 1000 bytes (a btree entry holds at most about 2700).
func entityKey(entity string) string {
	if len(entity) <= 1000 {
		return entity
	}
	sum := sha256.Sum256([]byte(entity))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// bumpSQL reserves n sequence numbers of an entity and locks its row until
// the transaction ends. The returned seq is the last one reserved.
const bumpSQL = `INSERT INTO ` + tableEntities + ` AS e (entity_key, seq) VALUES ($1, $2)
ON CONFLICT (entity_key) DO UPDATE SET seq = e.seq + excluded.seq
RETURNING e.seq`

// insertSQL writes the events in the order given (ORDER BY n: pos, their
// identity, is drawn after the sort), so that pos follows seq within an
// entity, as the relay's read of the window relies on.
const insertSQL = `INSERT INTO ` + tableEvents + `
(entity_key, seq, id, entity, partition, type, payload, created_at, trace, not_before)
SELECT k, s, i, e, p, t, pl, c, tr::jsonb, nb
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::integer[], $6::text[], $7::text[], $8::timestamptz[], $9::text[], $10::timestamptz[])
WITH ORDINALITY AS u(k, s, i, e, p, t, pl, c, tr, nb, n)
ORDER BY n`

// Put writes evs in tx, the caller's transaction: they are published after
// it commits, and never if it rolls back. It checks every event first
// ([outbox.Prepare]: Entity and Payload required; ID and CreatedAt filled)
// and writes nothing when one is invalid.
//
// For each entity, Put bumps the entity's sequence row; that row stays
// locked until tx ends, so a concurrent transaction writing events of the
// same entity waits for this one, and sequence numbers follow commit
// order. Keep such transactions short, and write an entity's events late
// in them. Under REPEATABLE READ or SERIALIZABLE a concurrent writer of
// the same entity fails with a serialization failure (40001): run the
// transaction again. Put also notifies Config.Channel (delivered on
// commit) to wake waiting relays.
func (st *Store) Put(ctx context.Context, tx pgx.Tx, evs ...outbox.Event) error {
	if len(evs) == 0 {
		return nil
	}
	now := st.cfg.NowFunc()
	prepared := make([]outbox.Event, len(evs))
	count := map[string]int64{}
	for i, ev := range evs {
		if err := outbox.Prepare(&ev, now); err != nil {
			return err
		}
		prepared[i] = ev
		count[entityKey(ev.Entity)]++
	}
	// Bump in key order, so that two transactions writing the same
	// entities never wait on each other in a cycle.
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	next := map[string]int64{}
	for _, k := range keys {
		var last int64
		if err := tx.QueryRow(ctx, bumpSQL, k, count[k]).Scan(&last); err != nil {
			return fmt.Errorf("outboxpg: put: sequence of an entity: %w", err)
		}
		next[k] = last - count[k] + 1
	}
	n := len(prepared)
	var (
		ekeys, ids, entities, types, payloads = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		seqs                                  = make([]int64, n)
		parts                                 = make([]int32, n)
		created                               = make([]time.Time, n)
		traces                                = make([]*string, n)    // JSON; nil: none
		notBefore                             = make([]*time.Time, n) // nil: none
	)
	for i, ev := range prepared {
		k := entityKey(ev.Entity)
		ekeys[i], seqs[i] = k, next[k]
		next[k]++
		ids[i], entities[i], types[i], payloads[i], created[i] = ev.ID, ev.Entity, ev.Type, ev.Payload, ev.CreatedAt
		parts[i] = int32(outbox.Partition(ev.Entity, st.cfg.Partitions))
		if len(ev.Trace) > 0 {
			b, _ := json.Marshal(ev.Trace) // a map of strings always encodes
			traces[i] = new(string(b))
		}
		if !ev.NotBefore.IsZero() {
			notBefore[i] = new(ev.NotBefore)
		}
	}
	if _, err := tx.Exec(ctx, insertSQL, ekeys, seqs, ids, entities, parts, types, payloads, created, traces, notBefore); err != nil {
		return fmt.Errorf("outboxpg: put: %w", err)
	}
	notify, args := `SELECT pg_notify((`+channelSQL+`), '')`, []any(nil)
	if st.cfg.Channel != "" {
		notify, args = `SELECT pg_notify($1, '')`, []any{st.cfg.Channel}
	}
	if _, err := tx.Exec(ctx, notify, args...); err != nil {
		return fmt.Errorf("outboxpg: put: notify: %w", err)
	}
	return nil
}

// handle is an event's stored reference: "<seq>.<pos>|<entity key>".
func handle(key string, seq, pos int64) string {
	return strconv.FormatInt(seq, 10) + "." + strconv.FormatInt(pos, 10) + "|" + key
}

func parseHandle(h string) (key string, seq, pos int64, err error) {
	s, key, ok := strings.Cut(h, "|")
	var p string
	if ok {
		s, p, ok = strings.Cut(s, ".")
	}
	if ok {
		seq, err = strconv.ParseInt(s, 10, 64)
	}
	if ok && err == nil {
		pos, err = strconv.ParseInt(p, 10, 64)
	}
	if !ok || err != nil {
		return "", 0, 0, fmt.Errorf("outboxpg: malformed event handle %q", h)
	}
	return key, seq, pos, nil
}
