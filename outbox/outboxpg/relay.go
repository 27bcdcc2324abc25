package outboxpg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/internal/partlease"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/pgstore"
)

// The relay side of the Store: partition leases, reading due events, and
// recording what happened to them.

// partitions returns the partitions owner holds, renewing and taking
// leases (package partlease's rule) when the last renewal is older than a
// third of the lease.
func (st *Store) partitions(ctx context.Context, owner string, now time.Time) ([]int, error) {
	return st.leases.Partitions(owner, now, st.cfg.Lease, func() ([]int, error) {
		return partlease.Acquire(ctx, pgLeases{db: st.cfg.DB, partitions: st.cfg.Partitions}, owner, st.cfg.Partitions, now, st.cfg.Lease)
	})
}

// pgLeases are the partition leases in sqsonce_outbox_leases and the live
// relays in sqsonce_outbox_relays.
type pgLeases struct {
	db         pgstore.DB
	partitions int
}

// Register registers owner until until, forgets the relays stopped a day
// before now, and counts the live relays, in one statement: the count's
// snapshot is the one before the statement's writes, so it counts the
// other live relays, and owner (live until until, after now).
func (l pgLeases) Register(ctx context.Context, owner string, now, until time.Time) (int, error) {
	var live int
	if err := l.db.QueryRow(ctx, `WITH registered AS (INSERT INTO `+tableRelays+` (owner, until) VALUES ($1, $2)
		ON CONFLICT (owner) DO UPDATE SET until = excluded.until RETURNING 1),
	forgotten AS (DELETE FROM `+tableRelays+` WHERE until < $3 AND owner <> $1 RETURNING 1)
	SELECT count(*) + 1 FROM `+tableRelays+` WHERE until > $4 AND owner <> $1`,
		owner, until, now.Add(-24*time.Hour), now).Scan(&live); err != nil {
		return 0, fmt.Errorf("outboxpg: register relay: %w", err)
	}
	return live, nil
}

func (l pgLeases) Held(ctx context.Context, owner string, now time.Time) ([]int, error) {
	rows, err := l.db.Query(ctx, `SELECT partition FROM `+tableLeases+` WHERE owner = $1 AND until > $2 ORDER BY partition`, owner, now)
	if err != nil {
		return nil, fmt.Errorf("outboxpg: read leases: %w", err)
	}
	ps, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("outboxpg: read leases: %w", err)
	}
	return ps, nil
}

func (l pgLeases) Drop(ctx context.Context, owner string, ps []int) error {
	if _, err := l.db.Exec(ctx, `DELETE FROM `+tableLeases+` WHERE owner = $1 AND partition = ANY($2)`, owner, ps); err != nil {
		return fmt.Errorf("outboxpg: give up partitions: %w", err)
	}
	return nil
}

func (l pgLeases) Renew(ctx context.Context, owner string, ps []int, now, until time.Time) ([]int, error) {
	rows, err := l.db.Query(ctx, `UPDATE `+tableLeases+` SET until = $3
		WHERE owner = $1 AND partition = ANY($2) AND until > $4 RETURNING partition`, owner, ps, until, now)
	if err != nil {
		return nil, fmt.Errorf("outboxpg: renew partitions: %w", err)
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("outboxpg: renew partitions: %w", err)
	}
	return renewed, nil
}

// Take takes free partitions (no lease, or an ended one), lowest first; a
// concurrent taker wins a partition and this insert skips it.
func (l pgLeases) Take(ctx context.Context, owner string, n int, now, until time.Time) ([]int, error) {
	rows, err := l.db.Query(ctx, `INSERT INTO `+tableLeases+` AS l (partition, owner, until)
		SELECT p, $1, $2 FROM generate_series(0, $3::integer - 1) p
		WHERE NOT EXISTS (SELECT 1 FROM `+tableLeases+` x WHERE x.partition = p AND x.until > $4)
		ORDER BY p LIMIT $5
		ON CONFLICT (partition) DO UPDATE SET owner = excluded.owner, until = excluded.until WHERE l.until <= $4
		RETURNING partition`, owner, until, l.partitions, now, n)
	if err != nil {
		return nil, fmt.Errorf("outboxpg: take partitions: %w", err)
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("outboxpg: take partitions: %w", err)
	}
	return taken, nil
}

const eventColumns = `entity_key, seq, pos, id, entity, type, payload, created_at, attempts, last_error, dead, trace, not_before`

func scanEvents(rows pgx.Rows) ([]outbox.Event, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (outbox.Event, error) {
		var (
			ev       outbox.Event
			key      string
			seq, pos int64
		)
		var notBefore *time.Time
		err := row.Scan(&key, &seq, &pos, &ev.ID, &ev.Entity, &ev.Type, &ev.Payload, &ev.CreatedAt, &ev.Attempts, &ev.LastError, &ev.Dead, &ev.Trace, &notBefore)
		if notBefore != nil {
			ev.NotBefore = *notBefore
		}
		ev.Handle = handle(key, seq, pos)
		return ev, err
	})
}

// dueSQL takes, in the partitions $1, each entity's ready run: its oldest
// events in sequence order, up to the first that is dead or waiting for a
// retry (a held-back event holds back its entity's later events). The
// entities are found by a skip scan of the (partition, entity_key, seq)
// index, one probe per entity, rather than a read of every pending row;
// each run is then read from the primary key, from the entity's oldest
// event or, for an entity with events in flight (the keys $4 and their
// last sequence numbers $5), from after the last of them. A run holds at
// most least(run, ceil($3 / entities)) events: with many entities a batch
// takes one event of each, with few it takes long runs, and the
// statements of a batch stay two (this read, and the delete) however the
// events spread (run is 1 for Due, which takes the oldest events only).
// The events are ranked by their place in their run, then by age, so
// that no entity starves behind others with long backlogs.
//
// run is written into the text (%[1]d, one text per batch size, so the
// prepared statement is still reused) rather than passed: the planner
// then bounds each run's read by it, where a limit it cannot evaluate
// counts as a tenth of the entity's events. With that guess, a backlog of
// some 20,000 events on a few entities priced the read above
// jit_above_cost, and every read was JIT-compiled (some 10 ms, against a
// fraction of one without). The run length is computed once, in m, for
// the same reason: as a subquery of each run's limit, the planner charged
// its count of the entities to every run.
const dueSQL = `WITH RECURSIVE heads(partition, k, seq) AS (
	SELECT p, f.entity_key, f.seq FROM unnest($1::integer[]) AS p CROSS JOIN LATERAL (
		SELECT o.entity_key, o.seq FROM ` + tableEvents + ` o WHERE o.partition = p ORDER BY o.entity_key, o.seq LIMIT 1) f
	UNION ALL
	SELECT h.partition, f.entity_key, f.seq FROM heads h CROSS JOIN LATERAL (
		SELECT o.entity_key, o.seq FROM ` + tableEvents + ` o
		WHERE o.partition = h.partition AND o.entity_key > h.k ORDER BY o.entity_key, o.seq LIMIT 1) f
), runs AS (
	SELECT r.* FROM heads h
	LEFT JOIN unnest($4::text[], $5::bigint[]) AS c(k, s) ON c.k = h.k
	CROSS JOIN (SELECT ($3 + count(*) - 1) / nullif(count(*), 0) AS len FROM heads) m
	CROSS JOIN LATERAL (
		SELECT n.*, row_number() OVER (ORDER BY n.seq) AS place,
			bool_and(NOT n.dead AND (n.next_at IS NULL OR n.next_at <= $2)) OVER (ORDER BY n.seq) AS ready
		FROM (
			SELECT * FROM (
				SELECT * FROM ` + tableEvents + ` o WHERE o.entity_key = h.k AND o.seq >= greatest(h.seq, c.s + 1) ORDER BY o.seq
				LIMIT %[1]d
			) o LIMIT m.len
		) n
	) r
)
SELECT ` + eventColumns + `
FROM runs WHERE ready
ORDER BY place, created_at, entity_key LIMIT $3`

// windowSQL reads the window: the outbox's oldest events (%[1]d of them, in
// the text as dueSQL's run, for the planner) apart from those in flight
// (their pos in $3), in the order they were written (pos), in one scan of
// the pos index, with no probe per entity. An entity's events are written
// after its sequence row is locked, so pos follows seq within an entity:
// whatever holds back an event (an earlier event of its entity, dead or
// waiting for a retry) is in the window before it, and the window tells
// which events are their entity's next. Each row says whether it is of a
// partition held ($1) and ready at $2; the payload comes only with those.
const windowSQL = `SELECT entity_key, seq, pos, id, entity, type, CASE WHEN mine AND ready THEN payload END,
	created_at, attempts, last_error, dead, trace, not_before, mine, ready
FROM (SELECT o.*, o.partition = ANY($1) AS mine, NOT o.dead AND (o.next_at IS NULL OR o.next_at <= $2) AS ready
	FROM ` + tableEvents + ` o WHERE o.pos <> ALL($3::bigint[]) ORDER BY o.pos LIMIT %[1]d) w
ORDER BY pos`

// windowRow is a row of windowSQL.
type windowRow struct {
	ev          outbox.Event
	key         string
	seq, pos    int64
	mine, ready bool
}

func scanWindow(rows pgx.Rows) ([]windowRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (windowRow, error) {
		var (
			r         windowRow
			payload   *string
			notBefore *time.Time
		)
		err := row.Scan(&r.key, &r.seq, &r.pos, &r.ev.ID, &r.ev.Entity, &r.ev.Type, &payload, &r.ev.CreatedAt,
			&r.ev.Attempts, &r.ev.LastError, &r.ev.Dead, &r.ev.Trace, &notBefore, &r.mine, &r.ready)
		if payload != nil {
			r.ev.Payload = *payload
		}
		if notBefore != nil {
			r.ev.NotBefore = *notBefore
		}
		r.ev.Handle = handle(r.key, r.seq, r.pos)
		return r, err
	})
}

// DueRuns implements [outbox.RunStore]: as Due, with each entity's ready
// run rather than its oldest event only, in one statement.
//
// When owner's last batch spread over many entities (manyOf), or, before
// owner's first read, the last batch this Store read for any owner did,
// and owner holds at least a quarter of the partitions, it reads
// the window (windowSQL: the oldest events, in one index scan, with no
// probe per entity) and makes the batch of it (rankWindow). When the
// window is no fair batch, and with few entities, it reads each entity's
// run (dueSQL: one probe per entity), the next windowRetry reads too
// after a window that was no fair batch.
func (st *Store) DueRuns(ctx context.Context, owner string, limit int, inFlight []outbox.Event) ([]outbox.Event, error) {
	return st.dueRuns(ctx, owner, limit, nil, inFlight)
}

// PublishedDueRuns implements [outbox.PublishedRunStore]: the delete of
// Published runs in the statement of DueRuns's read, a data-modifying
// WITH (publishedSQL), so that a relay's step makes one round trip to the
// database rather than two. The read sees the outbox as it was before the
// delete (one snapshot): it leaves out the events published as it leaves
// out those in flight.
func (st *Store) PublishedDueRuns(ctx context.Context, owner string, limit int, published, inFlight []outbox.Event) ([]outbox.Event, error) {
	return st.dueRuns(ctx, owner, limit, published, inFlight)
}

// deleteSQL is Published's delete, its parameters numbered from %[1]d:
// the events' keys, sequence numbers, ids and positions. The id too: a
// relay that lost its lease mid-send must not delete another event that
// reused (entity, seq) after Prune. The positions give the planner an
// indexed condition of its own (the pos index) besides the join of the
// keys; on a small outbox it may still scan the table.
const deleteSQL = `DELETE FROM ` + tableEvents + ` o USING unnest($%[1]d::text[], $%[2]d::bigint[], $%[3]d::text[]) AS h(k, s, id)
	WHERE o.pos = ANY($%[4]d::bigint[]) AND o.entity_key = h.k AND o.seq = h.s AND o.id = h.id`

// publishedSQL is deleteSQL as a WITH query of a read.
const publishedSQL = `published AS (` + deleteSQL + ` RETURNING 1)`

// publishedArgs are the parameters of deleteSQL for evs.
func publishedArgs(evs []outbox.Event) ([]any, error) {
	keys, seqs, ids, pos := make([]string, len(evs)), make([]int64, len(evs)), make([]string, len(evs)), make([]int64, len(evs))
	for i, ev := range evs {
		var err error
		if keys[i], seqs[i], pos[i], err = parseHandle(ev.Handle); err != nil {
			return nil, err
		}
		ids[i] = ev.ID
	}
	return []any{keys, seqs, ids, pos}, nil
}

// withPublished returns the read q (its parameters args) with its delete
// of published first when there are any, and the arguments of both.
func withPublished(q string, args []any, published []outbox.Event) (string, []any, error) {
	if len(published) == 0 {
		return q, args, nil
	}
	del, err := publishedArgs(published)
	if err != nil {
		return "", nil, err
	}
	q = withQuery(fmt.Sprintf(publishedSQL, len(args)+1, len(args)+2, len(args)+3, len(args)+4), q)
	return q, append(args, del...), nil
}

// withQuery returns q with the WITH query w first.
func withQuery(w, q string) string {
	if rest, ok := strings.CutPrefix(q, "WITH RECURSIVE "); ok {
		return "WITH RECURSIVE " + w + ", " + rest
	}
	return "WITH " + w + " " + q
}

// dueRuns is DueRuns, removing published in its read.
func (st *Store) dueRuns(ctx context.Context, owner string, limit int, published, inFlight []outbox.Event) ([]outbox.Event, error) {
	// The events published are still in the read's snapshot: they are
	// left out as those in flight are.
	gone := inFlight
	if len(published) > 0 {
		gone = append(slices.Clip(published), inFlight...)
	}
	after, err := lastInFlight(gone)
	if err != nil {
		return nil, err
	}
	now := st.cfg.NowFunc()
	held, err := st.partitions(ctx, owner, now)
	if err != nil || len(held) == 0 || limit <= 0 {
		if err == nil {
			err = st.Published(ctx, published)
		}
		return nil, err
	}
	// The window holds the other relays' events too: a relay holding
	// fewer than a quarter of the partitions probes its entities.
	spread := (st.cfg.Partitions + len(held) - 1) / len(held)
	if spread <= 4 && st.reads.window(owner) {
		pos := make([]int64, 0, len(gone))
		for _, ev := range gone {
			_, _, p, _ := parseHandle(ev.Handle) // parsed by lastInFlight
			pos = append(pos, p)
		}
		// A few events held back may come first: a quarter more than the
		// batch leaves room for them; and as many again for each other
		// relay's events.
		size := (limit + limit/4) * spread
		q, args, err := withPublished(fmt.Sprintf(windowSQL, size), []any{held, now, pos}, published)
		if err != nil {
			return nil, err
		}
		rows, err := st.cfg.DB.Query(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("outboxpg: due: %w", err)
		}
		window, err := scanWindow(rows)
		if err != nil {
			return nil, fmt.Errorf("outboxpg: due: %w", err)
		}
		// Removed (the statement's delete ran to its end).
		published = nil
		if evs, ok := rankWindow(window, len(window) == size, limit, after); ok {
			return evs, nil
		}
		st.reads.skewed(owner)
	}
	evs, err := st.due(ctx, held, now, limit, limit, after, published)
	if err == nil {
		st.reads.read(owner, manyEntities(evs, limit))
	}
	return evs, err
}

// windowRetry is how many per-entity reads follow a window that was no
// fair batch before the window is tried again.
const windowRetry = 16

// readModes is, per owner, which read DueRuns uses next.
type readModes struct {
	mu        sync.Mutex
	perEntity map[string]int // owner → per-entity reads left before the window may be tried
	many      map[string]bool
	// lastMany is whether the last per-entity read of any owner spread
	// over many entities: an owner this Store has not read for yet (a
	// relay just started) starts with the window when it did, as the
	// relays of a Store share its outbox.
	lastMany bool
}

// window reports whether owner's next read is the window.
func (m *readModes) window(owner string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	many, ok := m.many[owner]
	if !ok {
		many = m.lastMany
	}
	return many && m.perEntity[owner] == 0
}

// skewed notes that owner's window was no fair batch.
func (m *readModes) skewed(owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.perEntity == nil {
		m.perEntity = map[string]int{}
	}
	m.perEntity[owner] = windowRetry
}

// read notes a per-entity read of owner, and whether its batch spread
// over many entities.
func (m *readModes) read(owner string, many bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.many == nil {
		m.many = map[string]bool{}
	}
	if m.perEntity[owner] > 0 {
		m.perEntity[owner]--
	}
	m.many[owner] = many
	m.lastMany = many
}

// forget drops what is known of owner.
func (m *readModes) forget(owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.perEntity, owner)
	delete(m.many, owner)
}

// manyEntities reports whether evs spread over many entities (manyOf).
func manyEntities(evs []outbox.Event, limit int) bool {
	seen := make(map[string]bool, len(evs))
	for _, ev := range evs {
		seen[ev.Entity] = true
	}
	return manyOf(len(seen), limit)
}

// manyOf reports whether entities are many for a batch of limit: at least
// a quarter of limit, and 16 (with fewer, the per-entity read is as
// cheap).
func manyOf(entities, limit int) bool { return entities >= 16 && 4*entities >= limit }

// lastInFlight returns each entity key's last sequence number in evs.
func lastInFlight(evs []outbox.Event) (map[string]int64, error) {
	after := map[string]int64{}
	for _, ev := range evs {
		key, seq, _, err := parseHandle(ev.Handle)
		if err != nil {
			return nil, err
		}
		if last, ok := after[key]; !ok || seq > last {
			after[key] = seq
		}
	}
	return after, nil
}

// rankWindow makes the batch of the window (full: the outbox may hold
// more): each entity's ready events in it, from its first, or from after
// its last in flight (after: the entity's last seq in flight), up to the
// first that is dead or waiting for a retry, of the partitions held,
// ranked by place in the entity's run, then by age, at most its share of
// the batch (ceil(limit / entities)) of each entity. It reports false for
// a full window with no event to take, or with few entities (manyOf), or
// whose batch is under half its events once each entity is held to its
// share: the window is then no fair batch (a few entities' backlogs would
// hold back the others, or entities past its end would wait for them).
func rankWindow(window []windowRow, full bool, limit int, after map[string]int64) ([]outbox.Event, bool) {
	type ranked struct {
		ev    outbox.Event
		key   string
		place int
	}
	stopped := map[string]bool{} // entities behind a held-back event
	count := make(map[string]int, len(window))
	evs := make([]ranked, 0, len(window))
	for _, r := range window {
		switch {
		case stopped[r.key]:
		case !r.ready:
			stopped[r.key] = true
		case !r.mine:
		case r.seq <= after[r.key]:
			// Sent, and its removal failed: not before what is in flight.
		default:
			count[r.key]++
			evs = append(evs, ranked{ev: r.ev, key: r.key, place: count[r.key]})
		}
	}
	if len(count) == 0 {
		return nil, !full
	}
	share := (limit + len(count) - 1) / len(count)
	usable := len(evs)
	evs = slices.DeleteFunc(evs, func(r ranked) bool { return r.place > share })
	if full && (!manyOf(len(count), limit) || 2*len(evs) < min(limit, usable)) {
		return nil, false
	}
	slices.SortStableFunc(evs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.place, b.place), a.ev.CreatedAt.Compare(b.ev.CreatedAt), cmp.Compare(a.key, b.key))
	})
	out := make([]outbox.Event, min(len(evs), limit))
	for i := range out {
		out[i] = evs[i].ev
	}
	return out, true
}

// Due implements [outbox.Store]. Only committed events are visible, and an
// entity's sequence numbers are assigned in commit order, so an event that
// commits late is never skipped: it is its entity's next event.
func (st *Store) Due(ctx context.Context, owner string, limit int) ([]outbox.Event, error) {
	now := st.cfg.NowFunc()
	held, err := st.partitions(ctx, owner, now)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	return st.due(ctx, held, now, limit, 1, nil, nil)
}

// due takes, in the partitions held, up to limit events, at most run of
// each entity, each entity with events in flight from after its last one
// (after), and removes published in the same statement.
func (st *Store) due(ctx context.Context, held []int, now time.Time, limit, run int, after map[string]int64, published []outbox.Event) ([]outbox.Event, error) {
	keys, seqs := make([]string, 0, len(after)), make([]int64, 0, len(after))
	for k, s := range after {
		keys, seqs = append(keys, k), append(seqs, s)
	}
	q, args, err := withPublished(fmt.Sprintf(dueSQL, max(run, 1)), []any{held, now, limit, keys, seqs}, published)
	if err != nil {
		return nil, err
	}
	rows, err := st.cfg.DB.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("outboxpg: due: %w", err)
	}
	evs, err := scanEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("outboxpg: due: %w", err)
	}
	return evs, nil
}

// Published implements [outbox.Store]: it deletes the events.
func (st *Store) Published(ctx context.Context, evs []outbox.Event) error {
	if len(evs) == 0 {
		return nil
	}
	args, err := publishedArgs(evs)
	if err != nil {
		return err
	}
	if _, err := st.cfg.DB.Exec(ctx, fmt.Sprintf(deleteSQL, 1, 2, 3, 4), args...); err != nil {
		return fmt.Errorf("outboxpg: remove published events: %w", err)
	}
	return nil
}

// Failed implements [outbox.Store].
func (st *Store) Failed(ctx context.Context, ev outbox.Event, reason string, retryAt time.Time, dead bool) error {
	key, seq, _, err := parseHandle(ev.Handle)
	if err != nil {
		return err
	}
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	// No row: another relay published it meanwhile.
	if _, err := st.cfg.DB.Exec(ctx, `UPDATE `+tableEvents+` SET attempts = $3, last_error = $4, next_at = $5, dead = $6
		WHERE entity_key = $1 AND seq = $2 AND id = $7`, key, seq, ev.Attempts, reason, retryAt, dead, ev.ID); err != nil {
		return fmt.Errorf("outboxpg: record failed send of %s: %w", ev.ID, err)
	}
	return nil
}

// Stats implements [outbox.Store].
func (st *Store) Stats(ctx context.Context) (outbox.Stats, error) {
	var (
		out    outbox.Stats
		oldest *time.Time
	)
	err := st.cfg.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT dead), min(created_at) FILTER (WHERE NOT dead),
		count(*) FILTER (WHERE dead) FROM `+tableEvents).Scan(&out.Pending, &oldest, &out.Dead)
	if err != nil {
		return outbox.Stats{}, fmt.Errorf("outboxpg: stats: %w", err)
	}
	if oldest != nil {
		out.Oldest = *oldest
	}
	if out.Dead > 0 {
		rows, err := st.cfg.DB.Query(ctx, `SELECT `+eventColumns+` FROM `+tableEvents+` WHERE dead ORDER BY created_at, entity_key, seq LIMIT 100`)
		if err != nil {
			return outbox.Stats{}, fmt.Errorf("outboxpg: stats: dead events: %w", err)
		}
		if out.DeadEvents, err = scanEvents(rows); err != nil {
			return outbox.Stats{}, fmt.Errorf("outboxpg: stats: dead events: %w", err)
		}
	}
	return out, nil
}

// Requeue implements [outbox.Store].
func (st *Store) Requeue(ctx context.Context) (int, error) {
	tag, err := st.cfg.DB.Exec(ctx, `UPDATE `+tableEvents+` SET dead = false, attempts = 0, next_at = NULL WHERE dead`)
	if err != nil {
		return 0, fmt.Errorf("outboxpg: requeue: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Discard implements [outbox.Store].
func (st *Store) Discard(ctx context.Context, id string) error {
	tag, err := st.cfg.DB.Exec(ctx, `DELETE FROM `+tableEvents+` WHERE id = $1 AND dead`, id)
	if err != nil {
		return fmt.Errorf("outboxpg: discard %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return outbox.ErrNotDead
	}
	return nil
}

// Edit implements [outbox.Store].
func (st *Store) Edit(ctx context.Context, id, payload string) error {
	if payload == "" {
		return outbox.ErrNoPayload
	}
	tag, err := st.cfg.DB.Exec(ctx, `UPDATE `+tableEvents+` SET payload = $2, dead = false, attempts = 0, next_at = NULL
		WHERE id = $1 AND dead`, id, payload)
	if err != nil {
		return fmt.Errorf("outboxpg: edit %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return outbox.ErrNotDead
	}
	return nil
}

// Release implements [outbox.Store].
func (st *Store) Release(ctx context.Context, owner string) error {
	st.leases.Forget(owner)
	st.reads.forget(owner)
	_, err1 := st.cfg.DB.Exec(ctx, `DELETE FROM `+tableLeases+` WHERE owner = $1`, owner)
	_, err2 := st.cfg.DB.Exec(ctx, `DELETE FROM `+tableRelays+` WHERE owner = $1`, owner)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("outboxpg: release: %w", err)
	}
	return nil
}
