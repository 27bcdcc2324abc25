package dedupedynamo

import (
	"math/big"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Placeholders VersionGuard adds to a write's expressions.
const (
	versionName  = "#sqsonce_v"
	versionValue = ":sqsonce_v"
)

// versionCondition admits a write whose version is newer than the stored one.
const versionCondition = "(attribute_not_exists(" + versionName + ") OR " + versionName + " < " + versionValue + ")"

var setClause = regexp.MustCompile(`(?i)(^|\s)SET\s`)

// VersionGuard returns a copy of w that applies only if version is newer
// than the item's attribute attr: its condition gains
// "attribute_not_exists(attr) OR attr < :version" (AND-ed with any
// condition w had), and a Put or Update also stores version in attr.
//
// The write also asks for the item's old values when its condition fails
// (ReturnValuesOnConditionCheckFailure ALL_OLD), so that a failure of the
// version clause can be told from a failure of w's own condition.
//
// In a [Transactional] handler a failed version clause (the stored attr
// is at version or newer) means the message is stale: none of its writes
// are applied, its dedupe record is committed alone and the message is
// acked. A failure of w's own condition is not stale: it is a
// [*ConditionError] like any other write's, and nothing is committed. Use
// it for per-entity ordering when events can arrive out of order.
func VersionGuard(w types.TransactWriteItem, attr string, version int64) types.TransactWriteItem {
	v := num(version)
	// guard adds the version condition and its placeholders to one write's
	// expressions (copies: w's maps are not touched).
	guard := func(c *string, names map[string]string, values map[string]types.AttributeValue) (*string, map[string]string, map[string]types.AttributeValue) {
		if aws.ToString(c) == "" {
			c = aws.String(versionCondition)
		} else {
			c = aws.String("(" + *c + ") AND " + versionCondition)
		}
		names = cloneNames(names)
		names[versionName] = attr
		values = cloneValues(values)
		values[versionValue] = v
		return c, names, values
	}
	switch {
	case w.Put != nil:
		p := *w.Put
		p.Item = cloneValues(p.Item)
		p.Item[attr] = v
		p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues = guard(p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues)
		p.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		w.Put = &p
	case w.Update != nil:
		u := *w.Update
		expr := aws.ToString(u.UpdateExpression)
		set := versionName + " = " + versionValue
		if loc := setClause.FindStringIndex(expr); loc != nil {
			expr = expr[:loc[1]] + set + ", " + expr[loc[1]:]
		} else {
			expr = "SET " + set + " " + expr
		}
		u.UpdateExpression = aws.String(expr)
		u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues = guard(u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues)
		u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		w.Update = &u
	case w.Delete != nil:
		d := *w.Delete
		d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues = guard(d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues)
		d.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		w.Delete = &d
	case w.ConditionCheck != nil:
		c := *w.ConditionCheck
		c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues = guard(c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues)
		c.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		w.ConditionCheck = &c
	}
	return w
}

// staleVersion reports whether w's failed condition (reason) is its
// VersionGuard's version clause: w is guarded and the item's old values
// (returned with the cancellation) hold a version at least w's. Anything
// else (no guard, no old item, no stored version, a stored version that
// is not a number) means the version clause held, or cannot be shown to
// have failed, so the failure is w's own condition.
func staleVersion(w types.TransactWriteItem, reason types.CancellationReason) bool {
	var (
		names  map[string]string
		values map[string]types.AttributeValue
	)
	switch {
	case w.Put != nil:
		names, values = w.Put.ExpressionAttributeNames, w.Put.ExpressionAttributeValues
	case w.Update != nil:
		names, values = w.Update.ExpressionAttributeNames, w.Update.ExpressionAttributeValues
	case w.Delete != nil:
		names, values = w.Delete.ExpressionAttributeNames, w.Delete.ExpressionAttributeValues
	case w.ConditionCheck != nil:
		names, values = w.ConditionCheck.ExpressionAttributeNames, w.ConditionCheck.ExpressionAttributeValues
	}
	attr, ok := names[versionName]
	if !ok {
		return false
	}
	want, ok := number(values[versionValue])
	if !ok {
		return false
	}
	stored, ok := number(reason.Item[attr])
	return ok && stored.Cmp(want) >= 0
}

// number parses a DynamoDB number (up to 38 digits: wider than int64).
func number(v types.AttributeValue) (*big.Float, bool) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return nil, false
	}
	f, _, err := big.ParseFloat(n.Value, 10, 256, big.ToNearestEven)
	return f, err == nil
}
