package dynamo

import (
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
// In a [Transactional] handler a failed guard means the message is stale:
// none of its writes are applied, its dedupe record is committed alone and
// the message is acked. Use it for per-entity ordering when events can
// arrive out of order.
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
		w.Update = &u
	case w.Delete != nil:
		d := *w.Delete
		d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues = guard(d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues)
		w.Delete = &d
	case w.ConditionCheck != nil:
		c := *w.ConditionCheck
		c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues = guard(c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues)
		w.ConditionCheck = &c
	}
	return w
}

// guarded reports whether w carries a VersionGuard.
func guarded(w types.TransactWriteItem) bool {
	var names map[string]string
	switch {
	case w.Put != nil:
		names = w.Put.ExpressionAttributeNames
	case w.Update != nil:
		names = w.Update.ExpressionAttributeNames
	case w.Delete != nil:
		names = w.Delete.ExpressionAttributeNames
	case w.ConditionCheck != nil:
		names = w.ConditionCheck.ExpressionAttributeNames
	}
	_, ok := names[versionName]
	return ok
}
