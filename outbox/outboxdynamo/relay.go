package outboxdynamo

import (
	"context"
	"errors"
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
	"github.com/sqsonce/sqsonce/internal/partlease"
	"github.com/sqsonce/sqsonce/outbox"
)

// The relay side of the Store: partition leases, reading due events, and
// recording what happened to them.

func num(item map[string]types.AttributeValue, name string) int64 {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, _ := strconv.ParseInt(v.Value, 10, 64)
	return i
}

func str(item map[string]types.AttributeValue, name string) string {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return ""
	}
	return v.Value
}

func boolean(item map[string]types.AttributeValue, name string) bool {
	v, ok := item[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// partitions returns the partitions owner holds, renewing and taking
// leases (package partlease's rule) when the last renewal is older than a
// third of the lease.
func (st *Store) partitions(ctx context.Context, owner string, now time.Time) ([]int, error) {
	return st.leases.Partitions(owner, now, st.cfg.Lease, func() ([]int, error) {
		return partlease.Acquire(ctx, &ddbLeases{st: st}, owner, st.cfg.Partitions, now, st.cfg.Lease)
	})
}

// ddbLeases are the partition leases (items l/N) and live relays (items
// r/OWNER) for one round of the rule: Held reads every lease, and Take
// answers from that read.
type ddbLeases struct {
	st     *Store
	leases map[int]map[string]types.AttributeValue // by partition, as Held read them
	held   []int
}

func (l *ddbLeases) Register(ctx context.Context, owner string, now, until time.Time) (int, error) {
	st := l.st
	if _, err := st.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.cfg.Table), Item: map[string]types.AttributeValue{
		attrPK: s("r"), attrSK: s(owner), "until": n(until.UnixMilli()), attrExpiresAt: n(now.Add(24 * time.Hour).Unix()),
	}}, dynamohttp.Guard); err != nil {
		return 0, fmt.Errorf("outboxdynamo: register relay: %w", err)
	}
	relays, err := st.queryAll(ctx, "r")
	if err != nil {
		return 0, err
	}
	live := 0
	for _, r := range relays {
		if num(r, "until") > now.UnixMilli() {
			live++
		}
	}
	return live, nil
}

func (l *ddbLeases) Held(ctx context.Context, owner string, now time.Time) ([]int, error) {
	leases, err := l.st.queryAll(ctx, "l")
	if err != nil {
		return nil, err
	}
	l.leases = map[int]map[string]types.AttributeValue{}
	var mine []int
	for _, item := range leases {
		p, _ := strconv.Atoi(str(item, attrSK))
		l.leases[p] = item
		if p < l.st.cfg.Partitions && str(item, "owner") == owner && num(item, "until") > now.UnixMilli() {
			mine = append(mine, p)
		}
	}
	return mine, nil
}

func leaseKey(p int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: s("l"), attrSK: s(strconv.Itoa(p))}
}

func (l *ddbLeases) Drop(_ context.Context, owner string, ps []int) error {
	// Given up at the start of the owner's next Due, not now: a relay
	// that reads its next batch while it sends one may still hold events
	// of ps, sent but not yet removed, which the next owner would read and
	// send again. Due no longer reads ps meanwhile, nor renews them.
	l.st.leavingMu.Lock()
	defer l.st.leavingMu.Unlock()
	if l.st.leaving == nil {
		l.st.leaving = map[string][]int{}
	}
	for _, p := range ps {
		if !slices.Contains(l.st.leaving[owner], p) {
			l.st.leaving[owner] = append(l.st.leaving[owner], p)
		}
	}
	return nil
}

// leave gives up the partitions owner's last lease round let go (see
// ddbLeases.Drop), but not those in busy: events of theirs are still in
// flight (sent, not yet removed), so they are given up at a later Due.
func (st *Store) leave(ctx context.Context, owner string, busy map[int]bool) error {
	st.leavingMu.Lock()
	var ps, later []int
	for _, p := range st.leaving[owner] {
		if busy[p] {
			later = append(later, p)
		} else {
			ps = append(ps, p)
		}
	}
	if len(later) > 0 {
		st.leaving[owner] = later
	} else {
		delete(st.leaving, owner)
	}
	st.leavingMu.Unlock()
	for i, p := range ps {
		_, err := st.cfg.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(st.cfg.Table), Key: leaseKey(p),
			ConditionExpression: aws.String("#o = :me"), ExpressionAttributeNames: map[string]string{"#o": "owner"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":me": s(owner)}}, dynamohttp.Guard)
		if err != nil && !isConditionFailed(err) {
			st.leavingMu.Lock()
			st.leaving[owner] = append(st.leaving[owner], ps[i:]...)
			st.leavingMu.Unlock()
			return fmt.Errorf("outboxdynamo: give up partition %d: %w", p, err)
		}
		st.forget(p)
	}
	if len(ps) > 0 {
		// The owner's cached lease round may still name them.
		st.leases.Forget(owner)
	}
	return nil
}

func (l *ddbLeases) Renew(ctx context.Context, owner string, ps []int, _, until time.Time) ([]int, error) {
	// At once (they sit on a relay's step), in order for the answer.
	ok := make([]bool, len(ps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2 * readers)
	for i, p := range ps {
		g.Go(func() error {
			_, err := l.st.cfg.Client.UpdateItem(gctx, &dynamodb.UpdateItemInput{TableName: aws.String(l.st.cfg.Table), Key: leaseKey(p),
				UpdateExpression:          aws.String("SET #u = :until"),
				ConditionExpression:       aws.String("#o = :me"),
				ExpressionAttributeNames:  map[string]string{"#o": "owner", "#u": "until"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":me": s(owner), ":until": n(until.UnixMilli())}}, dynamohttp.Guard)
			switch {
			case err == nil:
				ok[i] = true
			case !isConditionFailed(err):
				return fmt.Errorf("outboxdynamo: renew partition %d: %w", p, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var renewed []int
	for i, p := range ps {
		if ok[i] {
			renewed = append(renewed, p)
		}
	}
	l.held = renewed
	return renewed, nil
}

func (l *ddbLeases) Take(ctx context.Context, owner string, want int, now, until time.Time) ([]int, error) {
	nowMs := now.UnixMilli()
	var free []int // lowest first
	for p := range l.st.cfg.Partitions {
		if item, ok := l.leases[p]; ok && num(item, "until") > nowMs {
			continue
		}
		if !slices.Contains(l.held, p) {
			free = append(free, p)
		}
	}
	var taken []int
	// As many at once as are still wanted (they sit on a relay's step),
	// lowest first, until enough were taken or none is left to try.
	for len(taken) < want && len(free) > 0 {
		try := free[:min(want-len(taken), len(free))]
		free = free[len(try):]
		ok := make([]bool, len(try))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(2 * readers)
		for i, p := range try {
			g.Go(func() error {
				_, err := l.st.cfg.Client.PutItem(gctx, &dynamodb.PutItemInput{TableName: aws.String(l.st.cfg.Table),
					Item:                      map[string]types.AttributeValue{attrPK: s("l"), attrSK: s(strconv.Itoa(p)), "owner": s(owner), "until": n(until.UnixMilli())},
					ConditionExpression:       aws.String("attribute_not_exists(pk) OR #u <= :now"),
					ExpressionAttributeNames:  map[string]string{"#u": "until"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(nowMs)}}, dynamohttp.Guard)
				switch {
				case err == nil:
					ok[i] = true
				case !isConditionFailed(err):
					return fmt.Errorf("outboxdynamo: take partition %d: %w", p, err)
				}
				return nil
			})
		}
		err := g.Wait()
		for i, p := range try {
			if ok[i] {
				// Another owner may have published from it since this
				// Store last held it.
				l.st.forget(p)
				taken = append(taken, p)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return taken, nil
}

func (st *Store) queryAll(ctx context.Context, pk string) ([]map[string]types.AttributeValue, error) {
	return st.query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(st.cfg.Table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk)},
		ConsistentRead:            aws.Bool(true),
	})
}

// query returns every item in reads the pages of.
func (st *Store) query(ctx context.Context, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	pk := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS).Value
	var out []map[string]types.AttributeValue
	for {
		res, err := st.cfg.Client.Query(ctx, in, dynamohttp.Guard)
		if err != nil {
			return nil, fmt.Errorf("outboxdynamo: query %s: %w", pk, err)
		}
		out = append(out, res.Items...)
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

func toEvent(item map[string]types.AttributeValue) outbox.Event {
	var tr map[string]string
	if m, ok := item["trace"].(*types.AttributeValueMemberM); ok {
		tr = make(map[string]string, len(m.Value))
		for k := range m.Value {
			tr[k] = str(m.Value, k)
		}
	}
	var notBefore time.Time
	if _, ok := item["not_before"]; ok {
		notBefore = time.UnixMilli(num(item, "not_before"))
	}
	return outbox.Event{
		Trace:     tr,
		NotBefore: notBefore,
		ID:        str(item, "id"),
		Entity:    str(item, "entity"),
		Type:      str(item, "type"),
		Payload:   str(item, "payload"),
		CreatedAt: time.UnixMilli(num(item, "created")),
		Attempts:  int(num(item, "attempts")),
		LastError: str(item, "last_error"),
		Dead:      boolean(item, "dead"),
		Handle:    str(item, attrPK) + "|" + str(item, attrSK),
	}
}

func handleKey(h string) (map[string]types.AttributeValue, error) {
	pk, sk, ok := strings.Cut(h, "|")
	if !ok {
		return nil, fmt.Errorf("outboxdynamo: malformed event handle %q", h)
	}
	return map[string]types.AttributeValue{attrPK: s(pk), attrSK: s(sk)}, nil
}

// readers is how many partitions Due reads at once, and how many
// BatchWriteItem calls Published makes at once, as the relay sends 4
// batches at once.
const readers = 4

// Published implements [outbox.Store]. It deletes the events in
// BatchWriteItem calls of 25, readers at once.
func (st *Store) Published(ctx context.Context, evs []outbox.Event) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for chunk := range slices.Chunk(evs, 25) {
		reqs := make([]types.WriteRequest, 0, len(chunk))
		for _, ev := range chunk {
			key, err := handleKey(ev.Handle)
			if err != nil {
				_ = g.Wait()
				return err
			}
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key}})
		}
		g.Go(func() error {
			if err := st.remove(gctx, reqs); err != nil {
				return err
			}
			st.unkeep(chunk)
			return nil
		})
	}
	return g.Wait()
}

// remove deletes reqs (at most 25), again for what DynamoDB leaves
// unprocessed, up to 10 times with a growing wait.
func (st *Store) remove(ctx context.Context, reqs []types.WriteRequest) error {
	for try := 0; len(reqs) > 0; try++ {
		out, err := st.cfg.Client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{st.cfg.Table: reqs},
		}, dynamohttp.Guard)
		if err != nil {
			return fmt.Errorf("outboxdynamo: remove published events: %w", err)
		}
		reqs = out.UnprocessedItems[st.cfg.Table]
		if len(reqs) > 0 {
			if try == 10 {
				return errors.New("outboxdynamo: remove published events: DynamoDB left items unprocessed 10 times")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(10<<try) * time.Millisecond):
			}
		}
	}
	return nil
}

// Failed implements [outbox.Store].
func (st *Store) Failed(ctx context.Context, ev outbox.Event, reason string, retryAt time.Time, dead bool) error {
	key, err := handleKey(ev.Handle)
	if err != nil {
		return err
	}
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	_, err = st.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(st.cfg.Table),
		Key:                 key,
		UpdateExpression:    aws.String("SET attempts = :a, last_error = :r, next_at = :n, dead = :d"),
		ConditionExpression: aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":a": n(int64(ev.Attempts)), ":r": s(reason), ":n": n(retryAt.UnixMilli()), ":d": &types.AttributeValueMemberBOOL{Value: dead},
		},
	}, dynamohttp.Guard)
	switch {
	case err == nil:
		st.keptFailed(ev, reason, retryAt, dead)
	case isConditionFailed(err): // gone: another relay published it
		st.unkeep([]outbox.Event{ev})
	default:
		return fmt.Errorf("outboxdynamo: record failed send of %s: %w", ev.ID, err)
	}
	return nil
}

// Stats implements [outbox.Store]. It reads every partition, readers at
// once, only the attributes it counts by; the dead events whole, in a
// second read of a partition that has some.
func (st *Store) Stats(ctx context.Context) (outbox.Stats, error) {
	parts := make([]outbox.Stats, st.cfg.Partitions)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for p := range parts {
		g.Go(func() error {
			items, err := st.query(gctx, &dynamodb.QueryInput{
				TableName:                 aws.String(st.cfg.Table),
				KeyConditionExpression:    aws.String("pk = :pk"),
				ProjectionExpression:      aws.String("#c, #d"),
				ExpressionAttributeNames:  map[string]string{"#c": "created", "#d": "dead"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(partitionPK(p))},
				ConsistentRead:            aws.Bool(true),
			})
			if err != nil {
				return err
			}
			ps := &parts[p]
			for _, item := range items {
				if boolean(item, "dead") {
					ps.Dead++
					continue
				}
				ps.Pending++
				if created := time.UnixMilli(num(item, "created")); ps.Oldest.IsZero() || created.Before(ps.Oldest) {
					ps.Oldest = created
				}
			}
			if ps.Dead == 0 {
				return nil
			}
			dead, err := st.query(gctx, &dynamodb.QueryInput{
				TableName:                 aws.String(st.cfg.Table),
				KeyConditionExpression:    aws.String("pk = :pk"),
				FilterExpression:          aws.String("#d = :t"),
				ExpressionAttributeNames:  map[string]string{"#d": "dead"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(partitionPK(p)), ":t": &types.AttributeValueMemberBOOL{Value: true}},
				ConsistentRead:            aws.Bool(true),
			})
			if err != nil {
				return err
			}
			for _, item := range dead[:min(len(dead), 100)] {
				ps.DeadEvents = append(ps.DeadEvents, toEvent(item))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return outbox.Stats{}, err
	}
	var out outbox.Stats
	for _, ps := range parts {
		out.Pending += ps.Pending
		out.Dead += ps.Dead
		out.DeadEvents = append(out.DeadEvents, ps.DeadEvents[:min(len(ps.DeadEvents), 100-len(out.DeadEvents))]...)
		if !ps.Oldest.IsZero() && (out.Oldest.IsZero() || ps.Oldest.Before(out.Oldest)) {
			out.Oldest = ps.Oldest
		}
	}
	return out, nil
}

// Requeue implements [outbox.Store].
func (st *Store) Requeue(ctx context.Context) (int, error) {
	defer st.forgetAll() // the requeued events are read again
	count := 0
	for p := range st.cfg.Partitions {
		items, err := st.queryAll(ctx, partitionPK(p))
		if err != nil {
			return count, err
		}
		for _, item := range items {
			if !boolean(item, "dead") {
				continue
			}
			_, err := st.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(st.cfg.Table),
				Key:                       map[string]types.AttributeValue{attrPK: item[attrPK], attrSK: item[attrSK]},
				UpdateExpression:          aws.String("SET attempts = :z, next_at = :z, dead = :f"),
				ConditionExpression:       aws.String("attribute_exists(pk)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":z": n(0), ":f": &types.AttributeValueMemberBOOL{Value: false}},
			}, dynamohttp.Guard)
			if err != nil && !isConditionFailed(err) {
				return count, fmt.Errorf("outboxdynamo: requeue: %w", err)
			}
			if err == nil {
				count++
			}
		}
	}
	return count, nil
}

// deadByID returns the dead events whose id is id, reading every
// partition (with a filter), readers at once.
func (st *Store) deadByID(ctx context.Context, id string) ([]map[string]types.AttributeValue, error) {
	parts := make([][]map[string]types.AttributeValue, st.cfg.Partitions)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for p := range parts {
		g.Go(func() error {
			var start map[string]types.AttributeValue
			for {
				res, err := st.cfg.Client.Query(gctx, &dynamodb.QueryInput{
					TableName:                 aws.String(st.cfg.Table),
					KeyConditionExpression:    aws.String("pk = :pk"),
					FilterExpression:          aws.String("#id = :id AND dead = :t"),
					ExpressionAttributeNames:  map[string]string{"#id": "id"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(partitionPK(p)), ":id": s(id), ":t": &types.AttributeValueMemberBOOL{Value: true}},
					ConsistentRead:            aws.Bool(true),
					ExclusiveStartKey:         start,
				}, dynamohttp.Guard)
				if err != nil {
					return fmt.Errorf("outboxdynamo: find dead event %s: %w", id, err)
				}
				parts[p] = append(parts[p], res.Items...)
				if len(res.LastEvaluatedKey) == 0 {
					return nil
				}
				start = res.LastEvaluatedKey
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(parts...), nil
}

// Discard implements [outbox.Store]. It reads every partition to find
// the event.
func (st *Store) Discard(ctx context.Context, id string) error {
	defer st.forgetAll()
	items, err := st.deadByID(ctx, id)
	if err != nil {
		return err
	}
	found := false
	for _, item := range items {
		_, err := st.cfg.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 aws.String(st.cfg.Table),
			Key:                       map[string]types.AttributeValue{attrPK: item[attrPK], attrSK: item[attrSK]},
			ConditionExpression:       aws.String("dead = :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
		}, dynamohttp.Guard)
		switch {
		case err == nil:
			found = true
		case !isConditionFailed(err): // requeued meanwhile: not dead any more
			return fmt.Errorf("outboxdynamo: discard %s: %w", id, err)
		}
	}
	if !found {
		return outbox.ErrNotDead
	}
	return nil
}

// Edit implements [outbox.Store]. It reads every partition to find the
// event.
func (st *Store) Edit(ctx context.Context, id, payload string) error {
	if payload == "" {
		return outbox.ErrNoPayload
	}
	defer st.forgetAll() // the edited event is read again
	items, err := st.deadByID(ctx, id)
	if err != nil {
		return err
	}
	found := false
	for _, item := range items {
		_, err := st.cfg.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(st.cfg.Table),
			Key:                 map[string]types.AttributeValue{attrPK: item[attrPK], attrSK: item[attrSK]},
			UpdateExpression:    aws.String("SET payload = :p, attempts = :z, next_at = :z, dead = :f"),
			ConditionExpression: aws.String("dead = :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":p": s(payload), ":z": n(0),
				":t": &types.AttributeValueMemberBOOL{Value: true}, ":f": &types.AttributeValueMemberBOOL{Value: false},
			},
		}, dynamohttp.Guard)
		switch {
		case err == nil:
			found = true
		case !isConditionFailed(err):
			return fmt.Errorf("outboxdynamo: edit %s: %w", id, err)
		}
	}
	if !found {
		return outbox.ErrNotDead
	}
	return nil
}

// Release implements [outbox.Store].
func (st *Store) Release(ctx context.Context, owner string) error {
	st.leases.Forget(owner)
	st.forgetOwner(owner, nil)
	st.leavingMu.Lock()
	delete(st.leaving, owner) // released below with the rest
	st.leavingMu.Unlock()
	leases, err := st.queryAll(ctx, "l")
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range leases {
		if str(l, "owner") != owner {
			continue
		}
		_, err := st.cfg.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(st.cfg.Table), Key: map[string]types.AttributeValue{attrPK: l[attrPK], attrSK: l[attrSK]},
			ConditionExpression: aws.String("#o = :me"), ExpressionAttributeNames: map[string]string{"#o": "owner"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":me": s(owner)}}, dynamohttp.Guard)
		if err != nil && !isConditionFailed(err) {
			errs = append(errs, err)
		}
	}
	_, err = st.cfg.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(st.cfg.Table),
		Key: map[string]types.AttributeValue{attrPK: s("r"), attrSK: s(owner)}}, dynamohttp.Guard)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("outboxdynamo: release: %w", err)
	}
	return nil
}
