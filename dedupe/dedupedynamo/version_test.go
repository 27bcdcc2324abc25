package dedupedynamo_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/dynamolease"
)

// TestVersionGuardEveryWriteKind: each kind of write gains the version
// condition (AND-ed with its own), the placeholders, and (Put, Update) the
// stored version, without touching the caller's write.
func TestVersionGuardEveryWriteKind(t *testing.T) {
	t.Parallel()
	names := func() map[string]string { return map[string]string{"#a": "a"} }
	values := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{":a": &types.AttributeValueMemberS{Value: "x"}}
	}
	own := aws.String("#a = :a")
	writes := map[string]types.TransactWriteItem{
		"put":    {Put: &types.Put{Item: map[string]types.AttributeValue{}, ConditionExpression: own, ExpressionAttributeNames: names(), ExpressionAttributeValues: values()}},
		"update": {Update: &types.Update{UpdateExpression: aws.String("SET b = :a"), ConditionExpression: own, ExpressionAttributeNames: names(), ExpressionAttributeValues: values()}},
		"delete": {Delete: &types.Delete{ConditionExpression: own, ExpressionAttributeNames: names(), ExpressionAttributeValues: values()}},
		"check":  {ConditionCheck: &types.ConditionCheck{ConditionExpression: own, ExpressionAttributeNames: names(), ExpressionAttributeValues: values()}},
	}
	for kind, w := range writes {
		g := dedupedynamo.VersionGuard(w, "v", 7)
		var cond *string
		var n map[string]string
		var vals map[string]types.AttributeValue
		switch {
		case g.Put != nil:
			cond, n, vals = g.Put.ConditionExpression, g.Put.ExpressionAttributeNames, g.Put.ExpressionAttributeValues
			if v, ok := g.Put.Item["v"].(*types.AttributeValueMemberN); !ok || v.Value != "7" {
				t.Errorf("put: version not stored: %+v", g.Put.Item)
			}
			if len(w.Put.Item) != 0 {
				t.Errorf("put: the caller's item was changed")
			}
		case g.Update != nil:
			cond, n, vals = g.Update.ConditionExpression, g.Update.ExpressionAttributeNames, g.Update.ExpressionAttributeValues
			if e := aws.ToString(g.Update.UpdateExpression); !strings.HasPrefix(e, "SET #sqsonce_v = :sqsonce_v, b = :a") {
				t.Errorf("update expression %q", e)
			}
		case g.Delete != nil:
			cond, n, vals = g.Delete.ConditionExpression, g.Delete.ExpressionAttributeNames, g.Delete.ExpressionAttributeValues
		default:
			cond, n, vals = g.ConditionCheck.ConditionExpression, g.ConditionCheck.ExpressionAttributeNames, g.ConditionCheck.ExpressionAttributeValues
		}
		if c := aws.ToString(cond); !strings.HasPrefix(c, "(#a = :a) AND (attribute_not_exists(#sqsonce_v) OR #sqsonce_v < :sqsonce_v)") {
			t.Errorf("%s: condition %q", kind, c)
		}
		if n["#sqsonce_v"] != "v" || n["#a"] != "a" || vals[":sqsonce_v"] == nil || vals[":a"] == nil {
			t.Errorf("%s: placeholders %v %v", kind, n, vals)
		}
		if on, ov := exprMaps(w); len(on) != 1 || len(ov) != 1 || aws.ToString(own) != "#a = :a" {
			t.Errorf("%s: the caller's expressions were changed: %v %v", kind, on, ov)
		}
	}
}

func exprMaps(w types.TransactWriteItem) (map[string]string, map[string]types.AttributeValue) {
	switch {
	case w.Put != nil:
		return w.Put.ExpressionAttributeNames, w.Put.ExpressionAttributeValues
	case w.Update != nil:
		return w.Update.ExpressionAttributeNames, w.Update.ExpressionAttributeValues
	case w.Delete != nil:
		return w.Delete.ExpressionAttributeNames, w.Delete.ExpressionAttributeValues
	}
	return w.ConditionCheck.ExpressionAttributeNames, w.ConditionCheck.ExpressionAttributeValues
}

// TestAttributesAreTheLeaseRecords: the record's attribute names are the
// shared lease record's, which the idempotency store writes too.
func TestAttributesAreTheLeaseRecords(t *testing.T) {
	t.Parallel()
	got := []string{dedupedynamo.AttrPK, dedupedynamo.AttrStatus, dedupedynamo.AttrLeaseUntil, dedupedynamo.AttrToken, dedupedynamo.AttrFingerprint, dedupedynamo.AttrExpiresAt}
	want := []string{dynamolease.AttrPK, dynamolease.AttrStatus, dynamolease.AttrLeaseUntil, dynamolease.AttrToken, dynamolease.AttrFingerprint, dynamolease.AttrExpiresAt}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("attribute %d: %q, the lease record's is %q", i, got[i], want[i])
		}
	}
}
