package dedupedynamo

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestDecodeCancel: every shape of cancellation reasons a transaction of
// writes plus the dedupe record (last) can come back with, and what each
// says. Handle's decisions rest on this alone.
func TestDecodeCancel(t *testing.T) {
	t.Parallel()
	plain := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String("t"),
		Item:      map[string]types.AttributeValue{"pk": str("a")},
	}}
	// guarded writes version 5; the item holds "v".
	guarded := VersionGuard(types.TransactWriteItem{Update: &types.Update{
		TableName:        aws.String("t"),
		Key:              map[string]types.AttributeValue{"pk": str("b")},
		UpdateExpression: aws.String("SET n = :n"),
	}}, "v", 5)
	reason := func(c string) types.CancellationReason { return types.CancellationReason{Code: aws.String(c)} }
	none := reason("None")
	ccf := reason("ConditionalCheckFailed")
	// staleCCF: the guarded item already holds version 7: the version
	// clause failed.
	staleCCF := types.CancellationReason{Code: aws.String("ConditionalCheckFailed"),
		Item: map[string]types.AttributeValue{"pk": str("b"), "v": num(7)}}
	// ownCCF: the guarded item holds version 3: its version clause held, so
	// the failure is the write's own clause.
	ownCCF := types.CancellationReason{Code: aws.String("ConditionalCheckFailed"),
		Item: map[string]types.AttributeValue{"pk": str("b"), "v": num(3)}}
	record := map[string]types.AttributeValue{"pk": str("ns#k"), "status": str("COMPLETED")}
	recordCCF := types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Item: record}
	conflict := reason("TransactionConflict")
	throttled := reason("ThrottlingError")
	validation := types.CancellationReason{Code: aws.String("ValidationError"), Message: aws.String("bad")}

	base := cancellation{userFailed: -1, stale: -1, rejected: -1}
	with := func(f func(*cancellation)) cancellation { c := base; f(&c); return c }
	tests := []struct {
		name    string
		writes  []types.TransactWriteItem
		reasons []types.CancellationReason
		want    cancellation
	}{
		{"record exists", []types.TransactWriteItem{plain}, []types.CancellationReason{none, recordCCF},
			with(func(c *cancellation) { c.recordFailed, c.record = true, record })},
		{"record exists wins over a write's failure", []types.TransactWriteItem{plain}, []types.CancellationReason{ccf, recordCCF},
			with(func(c *cancellation) { c.recordFailed, c.record = true, record })},
		{"record exists, no writes (a stale message's second commit)", nil, []types.CancellationReason{recordCCF},
			with(func(c *cancellation) { c.recordFailed, c.record = true, record })},
		{"user's own condition", []types.TransactWriteItem{plain, plain}, []types.CancellationReason{none, ccf, none},
			with(func(c *cancellation) { c.userFailed = 1 })},
		{"version clause: stale", []types.TransactWriteItem{plain, guarded}, []types.CancellationReason{none, staleCCF, none},
			with(func(c *cancellation) { c.stale = 1 })},
		{"guarded write's own clause is the user's", []types.TransactWriteItem{guarded}, []types.CancellationReason{ownCCF, none},
			with(func(c *cancellation) { c.userFailed = 0 })},
		{"guarded write without old item is the user's", []types.TransactWriteItem{guarded}, []types.CancellationReason{ccf, none},
			with(func(c *cancellation) { c.userFailed = 0 })},
		{"stale and a user failure: the user's wins", []types.TransactWriteItem{guarded, plain}, []types.CancellationReason{staleCCF, ccf, none},
			with(func(c *cancellation) { c.stale, c.userFailed = 0, 1 })},
		{"first user failure only", []types.TransactWriteItem{plain, plain, guarded}, []types.CancellationReason{ccf, ccf, staleCCF, none},
			with(func(c *cancellation) { c.userFailed = 0 })},
		{"conflict on a write", []types.TransactWriteItem{plain, plain}, []types.CancellationReason{none, conflict, none},
			with(func(c *cancellation) { c.conflict = true })},
		{"conflict on the record", []types.TransactWriteItem{plain}, []types.CancellationReason{none, conflict},
			with(func(c *cancellation) { c.conflict = true })},
		{"throttled: nothing decisive", []types.TransactWriteItem{plain}, []types.CancellationReason{throttled, none}, base},
		{"validation", []types.TransactWriteItem{plain}, []types.CancellationReason{validation, none},
			with(func(c *cancellation) { c.rejected = 0 })},
		{"validation with a conflict", []types.TransactWriteItem{plain}, []types.CancellationReason{conflict, validation},
			with(func(c *cancellation) { c.conflict, c.rejected = true, 1 })},
		{"all None", []types.TransactWriteItem{plain}, []types.CancellationReason{none, none}, base},
		{"no code at all", []types.TransactWriteItem{plain}, []types.CancellationReason{{}, {}}, base},
		{"fewer reasons than writes", []types.TransactWriteItem{plain, plain}, []types.CancellationReason{ccf, none},
			with(func(c *cancellation) { c.mismatch = true })},
		{"more reasons than writes", []types.TransactWriteItem{plain}, []types.CancellationReason{none, none, recordCCF},
			with(func(c *cancellation) { c.mismatch = true })},
		{"no reasons", []types.TransactWriteItem{plain}, nil, with(func(c *cancellation) { c.mismatch = true })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := decodeCancel(tc.writes, tc.reasons); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decodeCancel = %+v, want %+v", got, tc.want)
			}
		})
	}
}
