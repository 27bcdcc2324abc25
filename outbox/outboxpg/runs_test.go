package outboxpg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/outbox/outboxtest"
	"github.com/sqsonce/sqsonce/pgstore"
)

// countingDB counts the statements a Store sends, apart from those of the
// partition leases (once per third of the lease, not per batch).
type countingDB struct {
	pgstore.DB
	mu         sync.Mutex
	statements int
}

func (c *countingDB) count(sql string) {
	if strings.Contains(sql, "sqsonce_outbox_leases") || strings.Contains(sql, "sqsonce_outbox_relays") {
		return
	}
	c.mu.Lock()
	c.statements++
	c.mu.Unlock()
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.count(sql)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.count(sql)
	return c.DB.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.count(sql)
	return c.DB.QueryRow(ctx, sql, args...)
}

// orderSQS accepts every entry and records, per entity (the body's first
// field), the bodies in the order they were sent, and whether a call ever
// held two events of one entity.
type orderSQS struct {
	mu     sync.Mutex
	calls  int
	sent   map[string][]string
	shared bool // a call held two events of one entity
}

func (o *orderSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	out := &sqs.SendMessageBatchOutput{}
	inCall := map[string]bool{}
	for _, e := range in.Entries {
		entity, _, _ := strings.Cut(aws.ToString(e.MessageBody), " ")
		o.shared = o.shared || inCall[entity]
		inCall[entity] = true
		o.sent[entity] = append(o.sent[entity], aws.ToString(e.MessageBody))
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id})
	}
	return out, nil
}

func (o *orderSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "1048576"}}, nil
}

// With few entities and long runs (400 events of 4 entities), a relay
// step takes a whole batch of 100 in one read: two statements per batch
// (the read and the delete) however few the entities, not two per event
// of each entity; and every entity's events still leave in commit order,
// one per entity per SendMessageBatch call.
func TestRelayFewEntitiesTwoStatementsPerBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	writer := newStore(t, pool, outboxpg.Config{})
	const entities, perEntity = 4, 100
	for i := range perEntity {
		evs := make([]outbox.Event, entities)
		for e := range entities {
			evs[e] = outbox.Event{Entity: fmt.Sprintf("e%d", e), Payload: fmt.Sprintf("e%d %03d", e, i)}
		}
		if err := commit(ctx, pool, writer, evs...); err != nil {
			t.Fatal(err)
		}
	}
	db := &countingDB{DB: pool}
	st, serr := outboxpg.New(outboxpg.Config{DB: db})
	if serr != nil {
		t.Fatal(serr)
	}
	client := &orderSQS{sent: map[string][]string{}}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: "https://sqs.example/q"})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for range 1000 {
		n, err := relay.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != entities*perEntity {
		t.Fatalf("published %d events, want %d", total, entities*perEntity)
	}
	// Two per batch of 100, and the last read that found nothing.
	if want := 2*(total/100) + 1; db.statements > want {
		t.Errorf("%d statements for %d events of %d entities, want at most %d (two per batch of 100)", db.statements, total, entities, want)
	}
	if client.shared {
		t.Error("a SendMessageBatch call held two events of one entity")
	}
	for e := range entities {
		got := client.sent[fmt.Sprintf("e%d", e)]
		for i, body := range got {
			if want := fmt.Sprintf("e%d %03d", e, i); body != want {
				t.Fatalf("entity e%d: event %d sent is %q, want %q (commit order)", e, i, body, want)
			}
		}
	}
}

// DueRuns hands out each entity's ready run in commit order, ranked by
// place: a run stops before an event that waits for a retry, and no
// entity takes more than its share of the batch; Due still hands out
// each entity's oldest event only.
func TestDueRunsStopAtAHeldBackEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	st := newStore(t, pool, outboxpg.Config{})
	var evs []outbox.Event
	for i := range 30 {
		for _, e := range []string{"a", "b", "c", "d"} {
			evs = append(evs, outbox.Event{ID: fmt.Sprintf("%s-%02d", e, i), Entity: e, Payload: "x"})
		}
	}
	if err := commit(ctx, pool, st, evs...); err != nil {
		t.Fatal(err)
	}
	heads, err := st.Due(ctx, "r1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(heads); got != "a-00 b-00 c-00 d-00" {
		t.Fatalf("Due: %s, want each entity's oldest event", got)
	}
	// a-01 fails: it waits for its retry and holds back a's later events.
	all, err := st.DueRuns(ctx, "r1", 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Failed(ctx, all[4], "boom", time.Now().Add(time.Hour), false); err != nil || all[4].ID != "a-01" {
		t.Fatalf("Failed(%s): %v", all[4].ID, err)
	}
	runs, err := st.DueRuns(ctx, "r1", 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two of each entity at most (8 over 4), ranked by place; a stops at a-01.
	if got, want := ids(runs), "a-00 b-00 c-00 d-00 b-01 c-01 d-01"; got != want {
		t.Fatalf("DueRuns: %s, want %s", got, want)
	}
	// While b-00 is being sent, b's run starts after it.
	runs, err = st.DueRuns(ctx, "r1", 8, runs[1:5:5][0:1])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(runs), "a-00 b-01 c-00 d-00 b-02 c-01 d-01"; got != want {
		t.Fatalf("DueRuns with b-00 in flight: %s, want %s", got, want)
	}
}

func ids(evs []outbox.Event) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = e.ID
	}
	return strings.Join(s, " ")
}

// explainDB explains the Store's reads of due events (the window and the
// per-entity read) as it sends them, with the server's default JIT
// settings, and keeps the plans.
type explainDB struct {
	pgstore.DB
	pool  *pgxpool.Pool
	plans []string
	sqls  []string // the statement of each plan
	err   error
}

func (e *explainDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.Contains(sql, "FROM sqsonce_outbox o") {
		e.err = errors.Join(e.err, pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL jit = on; SET LOCAL jit_above_cost = 100000"); err != nil {
				return err
			}
			var plan string
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
				return err
			}
			e.plans, e.sqls = append(e.plans, plan), append(e.sqls, sql)
			return nil
		}))
	}
	return e.DB.Query(ctx, sql, args...)
}

// A long backlog of a few entities is the relay's usual state after an
// outage; its reads must stay cheap: not priced so high that PostgreSQL
// JIT-compiles them on every batch (many milliseconds, for a read of a
// fraction of one). Both backlogs: the entities' events interleaved (the
// window read), and one entity's events all before the others' (the
// window is no fair batch: the per-entity read).
func TestDueRunsReadOfALongBacklogIsNotJITCompiled(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		entities int
		order    string
	}{
		"interleaved":      {4, "i"},
		"one entity first": {4, "i % 4, i"},
		"many entities":    {200, "i"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t)
			db := &explainDB{DB: pool, pool: pool}
			st, err := outboxpg.New(outboxpg.Config{DB: db})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO sqsonce_outbox (entity_key, seq, id, entity, partition, payload, created_at)
				SELECT 'e' || (i % $1), i, 'id-' || i, 'e' || (i % $1), i % 4, 'x', now() FROM generate_series(1, 20000) i ORDER BY `+c.order, c.entities); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `ANALYZE sqsonce_outbox`); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				evs, err := st.DueRuns(ctx, "r1", 100, nil)
				if err != nil || len(evs) != 100 {
					t.Fatalf("DueRuns: %d events, %v; want 100", len(evs), err)
				}
			}
			if db.err != nil || len(db.plans) < 2 {
				t.Fatalf("explain: %d plans, %v", len(db.plans), db.err)
			}
			for _, plan := range db.plans {
				if strings.Contains(plan, `"JIT"`) {
					t.Fatalf("a read of due events was JIT-compiled: %s", plan)
				}
			}
		})
	}
}

// With many entities, a relay's reads after its first are one scan of the
// events in the order they were written (the pos index), each node of the
// plan run once: no probe per entity, whose cost grew with the entities
// in a batch. The batches still take each entity's events in commit
// order, after those in flight.
func TestDueRunsManyEntitiesReadOneIndexScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	db := &explainDB{DB: pool, pool: pool}
	st, err := outboxpg.New(outboxpg.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	const entities, perEntity = 100, 3
	for i := range perEntity {
		evs := make([]outbox.Event, entities)
		for e := range entities {
			evs[e] = outbox.Event{ID: fmt.Sprintf("e%03d-%d", e, i), Entity: fmt.Sprintf("e%03d", e), Payload: "x"}
		}
		if err := commit(ctx, pool, st, evs...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE sqsonce_outbox`); err != nil { // as autovacuum does
		t.Fatal(err)
	}
	// As a relay: the last batch removed, the next read while the current
	// one is in flight. e005's first event fails and waits for its retry,
	// holding back e005's later events.
	var inFlight, sent []outbox.Event
	next := map[string]int{} // entity → its next event
	taken := 0
	for i := 0; ; i++ {
		if err := st.Published(ctx, sent); err != nil {
			t.Fatal(err)
		}
		evs, err := st.DueRuns(ctx, "r1", 100, inFlight)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 && len(inFlight) == 0 {
			break
		}
		sent, inFlight = inFlight, nil
		for _, ev := range evs {
			if want := fmt.Sprintf("%s-%d", ev.Entity, next[ev.Entity]); ev.ID != want || (i > 0 && ev.Entity == "e005") {
				t.Fatalf("batch %d holds %s, want %s (each entity's next event in commit order), nothing of e005 after its failure", i, ev.ID, want)
			}
			next[ev.Entity]++
			taken++
			if ev.Entity == "e005" {
				ev.Attempts++
				if err := st.Failed(ctx, ev, "boom", time.Now().Add(time.Hour), false); err != nil {
					t.Fatal(err)
				}
				continue
			}
			inFlight = append(inFlight, ev)
		}
	}
	if want := entities*perEntity - perEntity + 1; taken != want {
		t.Fatalf("took %d events, want %d (all but e005's after its first)", taken, want)
	}
	if db.err != nil || len(db.plans) < 3 {
		t.Fatalf("explain: %d plans, %v", len(db.plans), db.err)
	}
	for i, plan := range db.plans[1:] {
		var nodes []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(plan), &nodes); err != nil || len(nodes) != 1 {
			t.Fatalf("plan %s: %v", plan, err)
		}
		scans, loops := nodes[0].Plan.walk()
		if scans["sqsonce_outbox_pos"] != 1 || loops > 1 {
			t.Fatalf("read %d: index scans %v, a node run %d times; want one scan of sqsonce_outbox_pos, each node run once: %s", i+2, scans, loops, plan)
		}
	}
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Type  string     `json:"Node Type"`
	Index string     `json:"Index Name"`
	Loops int        `json:"Actual Loops"`
	Plans []planNode `json:"Plans"`
}

// walk returns the index scans by index, and the most loops of a node.
func (n planNode) walk() (map[string]int, int) {
	scans, loops := map[string]int{}, n.Loops
	if n.Index != "" {
		scans[n.Index]++
	}
	for _, c := range n.Plans {
		s, l := c.walk()
		for k, v := range s {
			scans[k] += v
		}
		loops = max(loops, l)
	}
	return scans, loops
}

// Two relays sharing the partitions both read windows: each takes only
// its partitions' events, every event once, each entity's in commit order.
func TestDueRunsWindowTwoRelays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	clock := outboxtest.NewClock()
	db := &explainDB{DB: pool, pool: pool}
	st, err := outboxpg.New(outboxpg.Config{DB: db, NowFunc: clock.Now, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 40
	// The relays share the partitions first: r1 takes them all, r2
	// registers, r1 gives up half at its next renewal and r2 takes them.
	for _, owner := range []string{"r1", "r2", "r1", "r2"} {
		if _, err := st.DueRuns(ctx, owner, limit, nil); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Second)
	}
	const entities, perEntity = 128, 4
	for i := range perEntity {
		evs := make([]outbox.Event, entities)
		for e := range entities {
			evs[e] = outbox.Event{ID: fmt.Sprintf("e%03d-%d", e, i), Entity: fmt.Sprintf("e%03d", e), Payload: "x"}
		}
		if err := commit(ctx, pool, st, evs...); err != nil {
			t.Fatal(err)
		}
	}
	type relay struct {
		owner          string
		inFlight, sent []outbox.Event
	}
	relays := []*relay{{owner: "r1"}, {owner: "r2"}}
	next := map[string]int{}
	by := map[string]string{}
	taken := 0
	for range 100 {
		idle := 0
		for _, r := range relays {
			if err := st.Published(ctx, r.sent); err != nil {
				t.Fatal(err)
			}
			evs, err := st.DueRuns(ctx, r.owner, limit, r.inFlight)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 && len(r.inFlight) == 0 {
				idle++
			}
			r.sent, r.inFlight = r.inFlight, evs
			for _, ev := range evs {
				if want := fmt.Sprintf("%s-%d", ev.Entity, next[ev.Entity]); ev.ID != want {
					t.Fatalf("%s took %s, want %s (commit order, each event once)", r.owner, ev.ID, want)
				}
				if o, ok := by[ev.Entity]; ok && o != r.owner {
					t.Fatalf("entity %s taken by %s and %s", ev.Entity, o, r.owner)
				}
				by[ev.Entity] = r.owner
				next[ev.Entity]++
				taken++
			}
		}
		clock.Advance(time.Second)
		if idle == len(relays) {
			break
		}
	}
	if taken != entities*perEntity {
		t.Fatalf("took %d events, want %d", taken, entities*perEntity)
	}
	owners := map[string]int{}
	for _, o := range by {
		owners[o]++
	}
	if len(owners) != 2 {
		t.Fatalf("entities by relay %v, want both relays to take some", owners)
	}
	windows := 0
	for _, sql := range db.sqls {
		if strings.Contains(sql, "ORDER BY o.pos") {
			windows++
		}
	}
	if db.err != nil || 2*windows < len(db.plans) {
		t.Fatalf("%d of %d reads were windows (%v), want most", windows, len(db.plans), db.err)
	}
}

// publishedCount is a relay Observer that calls at and closes done once n
// events were published (before the relay goes on).
type publishedCount struct {
	outbox.NopObserver
	mu    sync.Mutex
	n     int
	count int
	at    func()
	done  chan struct{}
}

func (p *publishedCount) Published(evs []outbox.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count += len(evs)
	if p.count >= p.n && p.done != nil {
		p.at()
		close(p.done)
		p.done = nil
	}
}

// A running relay makes one statement per batch: the removal of the last
// batch's published events is in the statement that reads the next batch
// (while the current one is being sent), with many entities (the window
// read) and with few (the per-entity read); each entity's events still
// leave in commit order.
func TestRelayRunOneStatementPerBatch(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ entities, perEntity int }{
		"many entities": {100, 10},
		"few entities":  {4, 250},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t)
			writer := newStore(t, pool, outboxpg.Config{})
			for i := range c.perEntity {
				evs := make([]outbox.Event, c.entities)
				for e := range c.entities {
					evs[e] = outbox.Event{Entity: fmt.Sprintf("e%03d", e), Payload: fmt.Sprintf("e%03d %03d", e, i)}
				}
				if err := commit(ctx, pool, writer, evs...); err != nil {
					t.Fatal(err)
				}
			}
			db := &countingDB{DB: pool}
			st, err := outboxpg.New(outboxpg.Config{DB: db})
			if err != nil {
				t.Fatal(err)
			}
			total := c.entities * c.perEntity
			// The statements until the last event was removed: the relay
			// then polls again.
			var statements int
			obs := &publishedCount{n: total, done: make(chan struct{}), at: func() {
				db.mu.Lock()
				statements = db.statements
				db.mu.Unlock()
			}}
			done := obs.done
			client := &orderSQS{sent: map[string][]string{}}
			relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: "https://sqs.example/q",
				Observer: obs, PollInterval: time.Hour, StatsInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() { errc <- relay.Run(runCtx) }()
			select {
			case <-done:
			case err := <-errc:
				stop()
				t.Fatalf("Run returned %v before publishing", err)
			}
			stop()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			// One per batch of 100; and Stats, the first step's read (before
			// anything is in flight) and the last batch's removal.
			batches := total / 100
			if want := batches + 3; statements > want {
				t.Errorf("%d statements for %d batches of 100, want at most %d (one per batch, and Stats, the first read and the last removal)", statements, batches, want)
			}
			if client.shared {
				t.Error("a SendMessageBatch call held two events of one entity")
			}
			for e := range c.entities {
				got := client.sent[fmt.Sprintf("e%03d", e)]
				if len(got) != c.perEntity {
					t.Fatalf("entity e%03d: %d events sent, want %d", e, len(got), c.perEntity)
				}
				for i, body := range got {
					if want := fmt.Sprintf("e%03d %03d", e, i); body != want {
						t.Fatalf("entity e%03d: event %d sent is %q, want %q (commit order)", e, i, body, want)
					}
				}
			}
			var left int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM sqsonce_outbox`).Scan(&left); err != nil || left != 0 {
				t.Fatalf("%d events left in the outbox (%v), want 0", left, err)
			}
		})
	}
}

// A relay started on a Store whose last read spread over many entities
// (another relay's, or the relay's before a restart) reads the window at
// once: its first read is one index scan too, not a probe of every entity.
func TestDueRunsNewRelayStartsWithTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	db := &explainDB{DB: pool, pool: pool}
	st, err := outboxpg.New(outboxpg.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	const entities = 100
	for i := range 2 {
		evs := make([]outbox.Event, entities)
		for e := range entities {
			evs[e] = outbox.Event{ID: fmt.Sprintf("e%03d-%d", e, i), Entity: fmt.Sprintf("e%03d", e), Payload: "x"}
		}
		if err := commit(ctx, pool, st, evs...); err != nil {
			t.Fatal(err)
		}
	}
	for _, owner := range []string{"r1", "r2"} {
		evs, err := st.DueRuns(ctx, owner, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != entities {
			t.Fatalf("%s: %d events, want %d", owner, len(evs), entities)
		}
		for _, ev := range evs {
			if want := ev.Entity + "-0"; ev.ID != want {
				t.Fatalf("%s took %s, want %s (each entity's first event)", owner, ev.ID, want)
			}
		}
		if err := st.Release(ctx, owner); err != nil {
			t.Fatal(err)
		}
	}
	if db.err != nil || len(db.sqls) != 2 {
		t.Fatalf("%d reads (%v), want 2", len(db.sqls), db.err)
	}
	if !strings.Contains(db.sqls[1], "ORDER BY o.pos") {
		t.Fatalf("r2's first read, after r1's of %d entities, was not the window: %.60s", entities, db.sqls[1])
	}
}

// relaysDB counts the statements on the relays table.
type relaysDB struct {
	pgstore.DB
	mu         sync.Mutex
	statements int
}

func (c *relaysDB) count(sql string) {
	if strings.Contains(sql, "sqsonce_outbox_relays") {
		c.mu.Lock()
		c.statements++
		c.mu.Unlock()
	}
}

func (c *relaysDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.count(sql)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *relaysDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.count(sql)
	return c.DB.Query(ctx, sql, args...)
}

func (c *relaysDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.count(sql)
	return c.DB.QueryRow(ctx, sql, args...)
}

// A relay registers (and forgets relays stopped a day ago, and counts the
// live ones, to share the partitions) in one statement, on its first read
// and each lease renewal: the first read of a relay waits for it. The
// relays still share the partitions.
func TestRegisterOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	clock := outboxtest.NewClock()
	db := &relaysDB{DB: pool}
	st, err := outboxpg.New(outboxpg.Config{DB: db, NowFunc: clock.Now, Lease: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sqsonce_outbox_relays (owner, until) VALUES ('gone', $1)`, clock.Now().Add(-25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DueRuns(ctx, "r1", 100, nil); err != nil {
		t.Fatal(err)
	}
	if db.statements != 1 {
		t.Fatalf("a relay's first read made %d statements on the relays table, want 1", db.statements)
	}
	var owners []string
	rows, err := pool.Query(ctx, `SELECT owner FROM sqsonce_outbox_relays ORDER BY owner`)
	if err == nil {
		owners, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || fmt.Sprint(owners) != "[r1]" {
		t.Fatalf("relays %v (%v), want [r1] (the one stopped a day ago forgotten)", owners, err)
	}
	// r2 registers and takes the free half at its renewal; r1 gives it up
	// at its own.
	if _, err := st.DueRuns(ctx, "r2", 100, nil); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)
	for _, owner := range []string{"r1", "r2"} {
		if _, err := st.DueRuns(ctx, owner, 100, nil); err != nil {
			t.Fatal(err)
		}
	}
	held := map[string]int{}
	rows, err = pool.Query(ctx, `SELECT owner, count(*) FROM sqsonce_outbox_leases WHERE until > $1 GROUP BY owner`, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var o string
		var n int
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		held[o] = n
	}
	if rows.Err() != nil || held["r1"] == 0 || held["r2"] == 0 {
		t.Fatalf("partitions held %v (%v), want both relays to hold some", held, rows.Err())
	}
}
