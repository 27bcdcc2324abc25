package outboxdynamo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/internal/dynamohttp"
	"github.com/sqsonce/sqsonce/outbox"
)

// Reading the partitions. A partition's items sort by entity hash, then
// order stamp, so each entity's events form a run, oldest first. A Store
// reads each partition its relay holds in passes: a pass reads the
// partition from its start, a page (Query, sk > where the last page
// ended) at a time, and keeps what it read, run by run, until it is
// published. Due hands out each entity's oldest kept event (DueRuns its
// ready run), if it is neither parked nor waiting for its retry, without
// reading again what it kept; Published and Failed update what is kept. So an event is read
// once, as a plain relay loop reads it, however many steps its entity's
// run takes.
//
// A page that ends inside a run leaves the rest of that run unread: the
// pass goes on after the run (sk > "<entity hash>$": '$' sorts right after
// '#'), and the run is read on (sk between its last event read and its
// end) once its kept events are published (DueRuns: once fewer than a
// batch's worth are kept past those in flight), while the pass is young
// (passSteps). A new pass starts when the last one reached the end of the
// partition and nothing it kept is due: it finds the events committed
// since. An entity's later events have later stamps than any kept (see
// Store.Put), so they are found after the kept ones and never handed out
// before them. A pass that met a held-back entity (waiting for a retry,
// or parked, which another process may requeue, edit or discard) is
// followed by a new one only after heldRescan, so that a parked backlog is
// not read on every poll.
//
// What a Store keeps of a partition holds only while its owner holds the
// partition's lease without a break: it is dropped when the owner takes
// or gives up the partition, when another owner reads it, and when
// Requeue, Edit or Discard change events through this Store. A read that
// DynamoDB answered before a failed send of an event of its partition was
// recorded is not kept, and a read answered before an event was removed
// does not keep that event (see Store.written): the relay reads while it
// sends and removes.
// An owner gives up a partition only once none of its events is in
// flight (ddbLeases.Drop, Store.leave).
const (
	// minPage and maxPage bound a page of a pass: twice the entities
	// still wanted, so that one Query usually finds them.
	minPage = 8
	maxPage = 1000
	// runPage is how many events of one run are read at once after a
	// page ended inside it.
	runPage = 100
	// passSteps is how many Due calls a pass reads runs on: after that a
	// published run's unread rest waits for the next pass, so that a
	// long run does not keep the pass from finding other entities' new
	// events.
	passSteps = 64
	// heldRescan is the shortest time between passes of a partition
	// whose last pass met a held-back entity and found nothing due.
	heldRescan = time.Second
	// emptyRescan is the shortest time between passes of a partition
	// whose last pass found nothing: a relay busy with other partitions
	// does not query its empty ones at every step.
	emptyRescan = 50 * time.Millisecond
)

// kept is an event a pass read and that was not yet published.
type kept struct {
	ev     outbox.Event
	sk     string
	nextAt int64 // when its retry is due, in ms; 0 when none
}

// run is what a pass kept of one entity's events, in order.
type run struct {
	hash string
	evs  []kept
	last string // the sort key of the last event read
	more bool   // a page ended inside the run: it may go on past last
}

// ahead is what a Store kept of one partition for one owner.
type ahead struct {
	owner  string
	runs   []*run // in sort-key order
	byHash map[string]*run
	after  string    // the pass goes on after this sort key; "" from the start
	ended  bool      // the pass reached the end of the partition
	steps  int       // Due calls since the pass began
	began  time.Time // when the pass began
	held   bool      // the pass met a held-back entity
	found  bool      // the pass read an event
}

func newAhead(owner string, now time.Time) *ahead {
	return &ahead{owner: owner, byHash: map[string]*run{}, began: now}
}

// aheadOf returns owner's read of partition p: a new one when there was
// none, or another owner's. st.aheadMu is held.
func (st *Store) aheadOf(owner string, p int, now time.Time) *ahead {
	a := st.ahead[p]
	if a == nil || a.owner != owner {
		a = newAhead(owner, now)
		if st.ahead == nil {
			st.ahead = map[int]*ahead{}
		}
		st.ahead[p] = a
	}
	return a
}

// forget drops what was kept of partitions ps.
func (st *Store) forget(ps ...int) {
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	for _, p := range ps {
		delete(st.ahead, p)
	}
}

// forgetAll drops what was kept of every partition: events changed
// outside a relay's steps are read again.
func (st *Store) forgetAll() {
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	clear(st.ahead)
}

// forgetOwner drops what owner kept of partitions other than held (all of
// them for nil).
func (st *Store) forgetOwner(owner string, held []int) {
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	for p, a := range st.ahead {
		if a.owner == owner && !slices.Contains(held, p) {
			delete(st.ahead, p)
		}
	}
}

// Due implements [outbox.Store]. It reads the held partitions in order,
// readers at once, until it has limit events; each partition answers from
// what its pass kept, and reads only what it did not keep.
func (st *Store) Due(ctx context.Context, owner string, limit int) ([]outbox.Event, error) {
	return st.due(ctx, owner, limit, false, nil)
}

// DueRuns is [Store.Due] with, for each entity, its ready run rather than
// its oldest event only: its kept events in commit order, up to the first
// that is parked or waiting for its retry. Events are ranked by their
// place in their run, then by age, so that no entity starves behind
// another's long run; each entity's events are in the slice in commit
// order. inFlight are events owner took and is still sending (neither
// published nor failed yet): an entity of theirs has its run start after
// its last one of them.
func (st *Store) DueRuns(ctx context.Context, owner string, limit int, inFlight []outbox.Event) ([]outbox.Event, error) {
	return st.due(ctx, owner, limit, true, inFlight)
}

// due is Due, or DueRuns when runs.
func (st *Store) due(ctx context.Context, owner string, limit int, runs bool, inFlight []outbox.Event) ([]outbox.Event, error) {
	now := st.cfg.NowFunc()
	// By partition and entity hash: the last sort key in flight.
	flying := map[int]map[string]string{}
	busy := map[int]bool{}
	for _, ev := range inFlight {
		p, sk, ok := parseHandle(ev.Handle)
		if !ok {
			continue
		}
		hash, _, _ := strings.Cut(sk, "#")
		if flying[p] == nil {
			flying[p] = map[string]string{}
		}
		flying[p][hash] = max(flying[p][hash], sk)
		busy[p] = true
	}
	if err := st.leave(ctx, owner, busy); err != nil {
		return nil, err
	}
	held, err := st.partitions(ctx, owner, now)
	if err != nil {
		return nil, err
	}
	// A partition let go but not yet given up (events of it in flight)
	// is not read: its next owner reads it once it is given up.
	st.leavingMu.Lock()
	if going := st.leaving[owner]; len(going) > 0 {
		held = slices.DeleteFunc(slices.Clone(held), func(p int) bool { return slices.Contains(going, p) })
	}
	st.leavingMu.Unlock()
	st.forgetOwner(owner, held)
	var out []outbox.Event
	var places []int // with runs: each event's place in its run
	// With runs every partition is asked, so that one partition's long
	// runs do not fill the batch ahead of others' oldest events.
	for len(held) > 0 && (runs || len(out) < limit) {
		wave, need := min(readers, len(held)), limit-len(out)
		if runs {
			need = limit
		}
		got := make([][]outbox.Event, wave)
		g, gctx := errgroup.WithContext(ctx)
		for i, p := range held[:wave] {
			g.Go(func() (err error) {
				got[i], err = st.dueIn(gctx, owner, p, now, need, runs, flying[p])
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		for _, evs := range got {
			if runs {
				place := map[string]int{}
				for _, ev := range evs {
					places = append(places, place[ev.Entity])
					place[ev.Entity]++
				}
				out = append(out, evs...)
				continue
			}
			out = append(out, evs[:min(len(evs), limit-len(out))]...)
		}
		held = held[wave:]
	}
	if runs {
		// By place, then by age, then as the partitions ranked them:
		// each entity's events stay in commit order (a later place).
		idx := make([]int, len(out))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(places[a], places[b]), out[a].CreatedAt.Compare(out[b].CreatedAt))
		})
		ranked := make([]outbox.Event, min(limit, len(idx)))
		for i := range ranked {
			ranked[i] = out[idx[i]]
		}
		out = ranked
	}
	return out, nil
}

// dueIn returns up to need due events of partition p: each entity's
// oldest (its ready run when runs), if it is neither parked nor waiting
// for its retry (then it holds back its entity). flying maps an entity
// hash to its last event in flight: the entity's events up to it are not
// handed out.
func (st *Store) dueIn(ctx context.Context, owner string, p int, now time.Time, need int, runs bool, flying map[string]string) ([]outbox.Event, error) {
	st.aheadMu.Lock()
	a := st.aheadOf(owner, p, now)
	a.steps++
	st.aheadMu.Unlock()
	restarted := false
	for {
		st.aheadMu.Lock()
		if st.ahead[p] != a { // the partition changed hands meanwhile
			st.aheadMu.Unlock()
			return nil, nil
		}
		want := 1
		if runs {
			want = need
		}
		if r := a.tidy(flying, want); r != nil {
			from := r.last
			st.aheadMu.Unlock()
			if err := st.readRun(ctx, p, a, r, from, need); err != nil {
				return nil, err
			}
			continue
		}
		// Enough when need entities are due: with runs, an entity found
		// on a later page ranks before the second event of a run.
		heads, entities := a.heads(now.UnixMilli(), need, runs, flying)
		switch {
		case entities >= need:
		case !a.ended:
			after := a.after
			st.aheadMu.Unlock()
			if err := st.readPage(ctx, p, a, after, need-entities); err != nil {
				return nil, err
			}
			continue
		case len(heads) == 0 && !restarted && now.Sub(a.began) >= a.rest():
			// A new pass, for what was committed since the last began.
			restarted = true
			*a = *newAhead(owner, now)
			a.steps = 1
			st.aheadMu.Unlock()
			continue
		}
		st.aheadMu.Unlock()
		return heads, nil
	}
}

// rest is how long after it began a pass that found nothing due is
// followed by the next.
func (a *ahead) rest() time.Duration {
	switch {
	case a.held:
		return heldRescan
	case !a.found && a.ended:
		return emptyRescan
	}
	return 0
}

// tidy drops the runs that were published to their end, and the runs
// published as far as they were read once the pass is old; it returns a
// run to read on while the pass is young: one that keeps fewer than want
// events past those in flight (flying). With want 1 that is a run
// published as far as it was read; DueRuns asks for a batch's worth, so
// that the batch read while a run's kept events are sent has its next
// ones. st.aheadMu is held.
func (a *ahead) tidy(flying map[string]string, want int) *run {
	var next *run
	live := a.runs[:0]
	for _, r := range a.runs {
		young := r.more && a.steps <= passSteps
		switch {
		case len(r.evs) == 0 && !young:
			delete(a.byHash, r.hash)
			continue
		case next == nil && young && r.kept(flying[r.hash]) < want:
			next = r
		}
		live = append(live, r)
	}
	clear(a.runs[len(live):])
	a.runs = live
	return next
}

// kept is how many events r keeps after the sort key last ("" for all).
func (r *run) kept(last string) int {
	i := 0
	for i < len(r.evs) && r.evs[i].sk <= last {
		i++
	}
	return len(r.evs) - i
}

// heads returns up to need kept entities' oldest events that are due at
// now (ms), or when runs their ready runs ranked by place, and how many
// entities are due; an entity's events up to its last in flight (flying)
// are passed over. It drops the runs whose oldest event is parked:
// another process may requeue, edit or discard it, so a later pass reads
// them again. st.aheadMu is held.
func (a *ahead) heads(now int64, need int, runs bool, flying map[string]string) ([]outbox.Event, int) {
	type ready struct {
		r        *run
		from, to int // r.evs[from:to] are due
	}
	var due []ready
	live := a.runs[:0]
	for _, r := range a.runs {
		if len(r.evs) > 0 && r.evs[0].ev.Dead {
			a.held = true
			delete(a.byHash, r.hash)
			continue
		}
		live = append(live, r)
		from := 0
		if last, ok := flying[r.hash]; ok {
			for from < len(r.evs) && r.evs[from].sk <= last {
				from++
			}
		}
		if from == len(r.evs) {
			continue
		}
		if h := r.evs[from]; h.ev.Dead || h.nextAt > now {
			a.held = true
			continue
		}
		to := from + 1
		if runs {
			for to < len(r.evs) && !r.evs[to].ev.Dead && r.evs[to].nextAt <= now {
				to++ // up to the first held back: its run's later events wait
			}
		}
		due = append(due, ready{r, from, to})
	}
	clear(a.runs[len(live):])
	a.runs = live
	var out []outbox.Event
	for place := 0; len(out) < need; place++ {
		more := false
		for _, d := range due {
			if i := d.from + place; i < d.to && len(out) < need {
				out = append(out, d.r.evs[i].ev)
				more = true
			}
		}
		if !more {
			break
		}
	}
	return out, len(due)
}

// readPage reads the next page of a's pass, after the sort key after,
// sized for want more events, and keeps it.
func (st *Store) readPage(ctx context.Context, p int, a *ahead, after string, want int) error {
	pk := partitionPK(p)
	mark := st.mark(p)
	defer st.endRead(p)
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(st.cfg.Table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk)},
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(max(minPage, min(maxPage, 2*want)))),
	}
	if after != "" {
		in.KeyConditionExpression = aws.String("pk = :pk AND sk > :after")
		in.ExpressionAttributeValues[":after"] = s(after)
	}
	res, err := st.cfg.Client.Query(ctx, in, dynamohttp.Guard)
	if err != nil {
		return fmt.Errorf("outboxdynamo: query %s: %w", pk, err)
	}
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	gone, ok := st.goneSince(p, mark)
	if st.ahead[p] != a || a.after != after || a.ended || !ok {
		return nil // changed hands, began again, or failed meanwhile
	}
	var last *run
	for _, item := range res.Items {
		last = a.keep(item, gone)
	}
	a.found = a.found || len(res.Items) > 0
	switch {
	case len(res.LastEvaluatedKey) == 0:
		a.ended = true
	case last != nil: // go on after the last run seen
		last.more = true
		a.after = last.hash + "$"
	default: // no items, yet more to read: go on where DynamoDB stopped
		a.after = str(res.LastEvaluatedKey, attrSK)
	}
	return nil
}

// readRun reads on run r of a's pass, after its event from, and keeps
// what it reads: runPage events, or twice the events still wanted when
// more, up to maxPage.
func (st *Store) readRun(ctx context.Context, p int, a *ahead, r *run, from string, want int) error {
	pk := partitionPK(p)
	mark := st.mark(p)
	defer st.endRead(p)
	res, err := st.cfg.Client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(st.cfg.Table),
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":from": s(from), ":to": s(r.hash + "$")},
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(max(runPage, min(maxPage, 2*want)))),
	}, dynamohttp.Guard)
	if err != nil {
		return fmt.Errorf("outboxdynamo: query %s: %w", pk, err)
	}
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	gone, ok := st.goneSince(p, mark)
	if st.ahead[p] != a || a.byHash[r.hash] != r || r.last != from || !ok {
		return nil // changed hands, began again, or failed meanwhile
	}
	for _, item := range res.Items {
		a.keep(item, gone)
	}
	r.more = len(res.LastEvaluatedKey) > 0
	return nil
}

// keep adds item, read by a pass, to its run (unless the run has it
// already, or it is in gone: removed since the read began, it is read
// past) and returns the run. st.aheadMu is held.
func (a *ahead) keep(item map[string]types.AttributeValue, gone map[string]bool) *run {
	sk := str(item, attrSK)
	hash, _, _ := strings.Cut(sk, "#")
	r := a.byHash[hash]
	if r == nil {
		r = &run{hash: hash}
		a.byHash[hash] = r
		a.runs = append(a.runs, r)
	}
	if sk > r.last {
		if !gone[sk] {
			r.evs = append(r.evs, kept{ev: toEvent(item), sk: sk, nextAt: num(item, "next_at")})
		}
		r.last = sk
	}
	return r
}

// parseHandle returns the partition and sort key of an event's handle.
func parseHandle(h string) (p int, sk string, ok bool) {
	pk, sk, ok := strings.Cut(h, "|")
	if !ok || !strings.HasPrefix(pk, "b#") {
		return 0, "", false
	}
	p, err := strconv.Atoi(pk[2:])
	return p, sk, err == nil
}

// readMark is what a read of a partition saw recorded when it began: how
// many of the partition's events failed, and how many were removed.
type readMark struct{ failed, removed uint64 }

// goneLog is a partition's removals made while reads of it were in
// flight: sks[i] is the sort key of removal from+i; the removals before
// from are only counted.
type goneLog struct {
	from    uint64
	sks     []string
	reading int // reads of the partition in flight
}

// maxGone is how many removals a partition's goneLog remembers: far more
// than are made while one read is in flight.
const maxGone = 4096

// goneLog returns partition p's log of removals, made if it has none;
// st.aheadMu is held.
func (st *Store) goneLog(p int) *goneLog {
	if st.gone == nil {
		st.gone = map[int]*goneLog{}
	}
	g := st.gone[p]
	if g == nil {
		g = &goneLog{}
		st.gone[p] = g
	}
	return g
}

// mark returns what a read of partition p beginning now sees recorded;
// the read calls endRead when it is done.
func (st *Store) mark(p int) readMark {
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	g := st.goneLog(p)
	g.reading++
	return readMark{failed: st.wrote[p], removed: g.from + uint64(len(g.sks))}
}

// endRead notes that a read of partition p is done: with none left in
// flight, its removals need not be remembered.
func (st *Store) endRead(p int) {
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	g := st.gone[p]
	g.reading--
	if g.reading == 0 {
		g.from += uint64(len(g.sks))
		g.sks = nil
	}
}

// goneSince returns the sort keys of partition p's events removed since
// mark, and false when a failed send was recorded since (the read may
// hold the event as it was before), or when removals since were
// forgotten. st.aheadMu is held.
func (st *Store) goneSince(p int, mark readMark) (map[string]bool, bool) {
	if st.wrote[p] != mark.failed {
		return nil, false
	}
	g := st.gone[p]
	if g.from+uint64(len(g.sks)) == mark.removed {
		return nil, true
	}
	if mark.removed < g.from {
		return nil, false
	}
	gone := map[string]bool{}
	for _, sk := range g.sks[mark.removed-g.from:] {
		gone[sk] = true
	}
	return gone, true
}

// written records that the event of handle h was removed, or that its
// send failed, and finds its kept copy: its run and index, or nil. A read
// of its partition answered before the write may come back after it: it
// may hold the event as it was before, so it is not kept after a failure
// (readPage, readRun), and does not keep a removed event. Either the read
// is kept first, and its copy updated here, or the read finds the write
// recorded. st.aheadMu is held.
func (st *Store) written(h string, failed bool) (*run, int) {
	p, sk, ok := parseHandle(h)
	if !ok {
		return nil, 0
	}
	if failed {
		if st.wrote == nil {
			st.wrote = map[int]uint64{}
		}
		st.wrote[p]++
	} else {
		g := st.goneLog(p)
		switch {
		case g.reading == 0:
			g.from++
		case len(g.sks) == maxGone:
			g.from += maxGone / 2
			g.sks = append(slices.Clone(g.sks[maxGone/2:]), sk)
		default:
			g.sks = append(g.sks, sk)
		}
	}
	a := st.ahead[p]
	if a == nil {
		return nil, 0
	}
	hash, _, _ := strings.Cut(sk, "#")
	r := a.byHash[hash]
	if r == nil {
		return nil, 0
	}
	for i, k := range r.evs {
		if k.sk == sk {
			return r, i
		}
	}
	return nil, 0
}

// unkeep drops the kept events evs (published, or gone).
func (st *Store) unkeep(evs []outbox.Event) {
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	for _, ev := range evs {
		if r, i := st.written(ev.Handle, false); r != nil {
			r.evs = slices.Delete(r.evs, i, i+1)
		}
	}
}

// keptFailed records a failed send of the kept event ev, as Failed wrote
// it.
func (st *Store) keptFailed(ev outbox.Event, reason string, retryAt time.Time, dead bool) {
	st.aheadMu.Lock()
	defer st.aheadMu.Unlock()
	r, i := st.written(ev.Handle, true)
	if r == nil {
		return
	}
	k := &r.evs[i]
	k.ev.Attempts, k.ev.LastError, k.ev.Dead = ev.Attempts, reason, dead
	k.nextAt = retryAt.UnixMilli()
}
