package dynamolease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/internal/dynamohttp"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/internal/steprec"
	"github.com/sqsonce/sqsonce/step"
)

// Field names of one step in AttrSteps.
const (
	stepStatus   = "status"   // S
	stepResult   = "result"   // B, absent when empty
	stepReason   = "reason"   // S, absent when empty
	stepAt       = "at"       // N: ms since the epoch
	stepResolved = "resolved" // S, absent when empty
)

// hasSteps reports whether a record item holds steps.
func hasSteps(item map[string]types.AttributeValue) bool {
	m, ok := item[AttrSteps].(*types.AttributeValueMemberM)
	return ok && len(m.Value) > 0
}

// encodeSteps is the AttrSteps value of steps.
func encodeSteps(steps map[string]step.Record) types.AttributeValue {
	m := make(map[string]types.AttributeValue, len(steps))
	for name, r := range steps {
		v := map[string]types.AttributeValue{
			stepStatus: Str(string(r.Status)),
			stepAt:     Num(r.At.UnixMilli()),
		}
		if len(r.Result) > 0 {
			v[stepResult] = &types.AttributeValueMemberB{Value: r.Result}
		}
		if r.Reason != "" {
			v[stepReason] = Str(r.Reason)
		}
		if r.Resolved != "" {
			v[stepResolved] = Str(r.Resolved)
		}
		m[name] = &types.AttributeValueMemberM{Value: v}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// ParseSteps reads the steps of a record item, nil when it holds none.
func ParseSteps(item map[string]types.AttributeValue) map[string]step.Record {
	m, ok := item[AttrSteps].(*types.AttributeValueMemberM)
	if !ok || len(m.Value) == 0 {
		return nil
	}
	steps := make(map[string]step.Record, len(m.Value))
	for name, v := range m.Value {
		f, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		r := step.Record{
			Status:   step.Status(GetS(f.Value, stepStatus)),
			Reason:   GetS(f.Value, stepReason),
			Resolved: GetS(f.Value, stepResolved),
			At:       time.UnixMilli(GetN(f.Value, stepAt)).UTC(),
		}
		if b, ok := f.Value[stepResult].(*types.AttributeValueMemberB); ok {
			r.Result = b.Value
		}
		steps[name] = r
	}
	return steps
}

// stepsUpdate is the SET/REMOVE clauses that write steps (whole) and the
// unknown-step mark, with their names and values.
func stepsUpdate(steps map[string]step.Record, names map[string]string, values map[string]types.AttributeValue) (set, remove string) {
	names["#steps"], names["#us"] = AttrSteps, AttrUnknownStep
	if len(steps) == 0 {
		return "", "#steps, #us"
	}
	values[":steps"] = encodeSteps(steps)
	if u := steprec.UnknownStep(steps); u != "" {
		values[":us"] = Str(u)
		return ", #steps = :steps, #us = :us", ""
	}
	return ", #steps = :steps", "#us"
}

// update builds an UpdateItem of pk: SET set, REMOVE remove, on cond.
func (t *Table) update(pk, set, remove, cond string, names map[string]string, values map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	expr := "SET " + strings.TrimPrefix(set, ", ")
	if remove != "" {
		expr += " REMOVE " + remove
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(t.Name),
		Key:                                 Key(pk),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// takeOver claims the record old (IN_PROGRESS, its lease ended, holding
// steps) in place for a lease of d: a new token and lease, the steps
// kept. It is conditioned on old's token, so that of two takeovers one
// wins; the loser gets the winner's record as its answer (InProgress), or
// Outcome 0 when the record changed otherwise (claim again).
func (t *Table) takeOver(ctx context.Context, pk string, old map[string]types.AttributeValue, d time.Duration) (Result, error) {
	now := t.Now()
	token := leasekey.NewToken()
	until := now.Add(d)
	names := map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#lu": AttrLeaseUntil, "#exp": AttrExpiresAt}
	values := map[string]types.AttributeValue{
		":tk": Str(token), ":old": Str(GetS(old, AttrToken)), ":in_progress": Str(StatusInProgress),
		":lu": Num(until.UnixMilli()), ":exp": Num(now.Add(t.TTL).Unix()),
		":now": Num(now.Unix()), ":now_ms": Num(now.UnixMilli()),
	}
	in := t.update(pk, "#tk = :tk, #lu = :lu, #exp = :exp", "",
		"#tk = :old AND #st = :in_progress AND #lu < :now_ms AND #exp >= :now", names, values)
	_, err := t.Client.UpdateItem(ctx, in, dynamohttp.Guard)
	if err == nil {
		return Result{Outcome: Claimed, Token: token, LeaseUntil: until, Steps: ParseSteps(old)}, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return Result{}, fmt.Errorf("%s: claim: take over: %w", t.Prefix, err)
	}
	cur := Parse(ccf.Item)
	if cur.Token == token && cur.Status == StatusInProgress {
		// Our own update, applied, its answer lost and the call retried.
		return Result{Outcome: Claimed, Token: token, LeaseUntil: until, Steps: ParseSteps(ccf.Item)}, nil
	}
	if cur.Status == StatusInProgress && !cur.LeaseUntil.Before(now) && cur.ExpiresAt >= now.Unix() {
		return Result{Outcome: InProgress, LeaseUntil: cur.LeaseUntil, Fingerprint: cur.Fingerprint, Item: ccf.Item}, nil
	}
	return Result{}, nil
}

// releaseKeepingSteps ends the lease of the claim holding token and
// retires its token, keeping the record and its steps.
func (t *Table) releaseKeepingSteps(ctx context.Context, pk, token string) error {
	names := map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#lu": AttrLeaseUntil}
	values := ownedValues(token)
	retired := leasekey.NewToken()
	values[":new"], values[":ended"] = Str(retired), Num(0)
	_, err := t.Client.UpdateItem(ctx, t.update(pk, "#tk = :new, #lu = :ended", "", ownedCondition, names, values), dynamohttp.Guard)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && GetS(ccf.Item, AttrToken) == retired {
		return nil // our own update, applied, its answer lost and the call retried
	}
	if err != nil {
		return t.fenced("release", err)
	}
	return nil
}

// SaveSteps replaces the steps of the claim holding token.
func (t *Table) SaveSteps(ctx context.Context, pk, token string, steps map[string]step.Record) error {
	names := map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#exp": AttrExpiresAt}
	values := ownedValues(token)
	values[":exp"] = Num(t.Now().Add(t.TTL).Unix())
	set, remove := stepsUpdate(steps, names, values)
	_, err := t.Client.UpdateItem(ctx, t.update(pk, "#exp = :exp"+set, remove, ownedCondition, names, values), dynamohttp.Guard)
	if err != nil {
		return t.fenced("save steps", err)
	}
	return nil
}

// Scanner is the Scan call of the DynamoDB client, which only an
// operator's listing makes (so it is not part of the stores' client
// interfaces; *dynamodb.Client has it).
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Getter is the GetItem call of the DynamoDB client, which an operator's
// Resolve makes (*dynamodb.Client has it).
type Getter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Unknown lists up to limit (0: all) live records of namespace ns that
// have a step of unknown outcome, with one Scan of the table (paged).
func (t *Table) Unknown(ctx context.Context, ns string, limit int) ([]step.Unresolved, error) {
	sc, ok := t.Client.(Scanner)
	if !ok {
		return nil, fmt.Errorf("%s: unknown steps: the DynamoDB client has no Scan method (use *dynamodb.Client)", t.Prefix)
	}
	now := t.Now()
	prefix := ns + "#"
	var out []step.Unresolved
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(t.Name),
		FilterExpression:          aws.String("attribute_exists(#us) AND begins_with(#pk, :prefix) AND #exp >= :now"),
		ExpressionAttributeNames:  map[string]string{"#us": AttrUnknownStep, "#pk": AttrPK, "#exp": AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":prefix": Str(prefix), ":now": Num(now.Unix())},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		page, err := sc.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("%s: unknown steps: scan %s: %w", t.Prefix, t.Name, err)
		}
		for _, item := range page.Items {
			name := GetS(item, AttrUnknownStep)
			steps := ParseSteps(item)
			r := Parse(item)
			if _, ok := steps[name]; !ok {
				continue
			}
			out = append(out, step.Unresolved{
				Key: strings.TrimPrefix(GetS(item, AttrPK), prefix), Step: name, Record: steps[name],
				Held: r.Status == StatusInProgress && !r.LeaseUntil.Before(now),
			})
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Resolve records a person's decision on step name of pk's record: one
// strongly consistent read, then an update conditioned on the token read
// and on the lease having ended.
func (t *Table) Resolve(ctx context.Context, pk, name string, applied bool) error {
	g, ok := t.Client.(Getter)
	if !ok {
		return fmt.Errorf("%s: resolve: the DynamoDB client has no GetItem method (use *dynamodb.Client)", t.Prefix)
	}
	for attempt := 0; ; attempt++ {
		out, err := g.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.Name), Key: Key(pk), ConsistentRead: aws.Bool(true)}, dynamohttp.Guard)
		if err != nil {
			return fmt.Errorf("%s: resolve: read: %w", t.Prefix, err)
		}
		now := t.Now()
		r := Parse(out.Item)
		steps := ParseSteps(out.Item)
		if r.Status != StatusInProgress || r.ExpiresAt < now.Unix() || !step.Resolvable(steps[name]) {
			return fmt.Errorf("%s: resolve %q: %w", t.Prefix, name, step.ErrNotUnknown)
		}
		if !r.LeaseUntil.Before(now) {
			return fmt.Errorf("%s: resolve %q: %w", t.Prefix, name, step.ErrHeld)
		}
		res := step.Resolution(steps[name], applied)
		res.At = now.UTC()
		steps[name] = res
		names := map[string]string{"#tk": AttrToken, "#st": AttrStatus, "#lu": AttrLeaseUntil, "#exp": AttrExpiresAt}
		values := ownedValues(r.Token)
		values[":exp"], values[":now_ms"] = Num(now.Add(t.TTL).Unix()), Num(now.UnixMilli())
		set, remove := stepsUpdate(steps, names, values)
		_, err = t.Client.UpdateItem(ctx, t.update(pk, "#exp = :exp"+set, remove, ownedCondition+" AND #lu < :now_ms", names, values), dynamohttp.Guard)
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && attempt < 2 {
			continue // it changed since the read: judge again
		}
		if err != nil {
			return t.fenced("resolve "+strconv.Quote(name), err)
		}
		return nil
	}
}
