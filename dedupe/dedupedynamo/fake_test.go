package dedupedynamo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
)

// fakeTx answers TransactWriteItems with the queued errors, then success.
type fakeTx struct {
	dedupedynamo.DynamoDBAPI
	errs   []error
	inputs []*dynamodb.TransactWriteItemsInput
}

func (f *fakeTx) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.inputs = append(f.inputs, in)
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func canceled(codes ...string) error {
	var rs []types.CancellationReason
	for _, c := range codes {
		rs = append(rs, types.CancellationReason{Code: aws.String(c)})
	}
	return &types.TransactionCanceledException{CancellationReasons: rs}
}

func oneWrite(context.Context, *consumer.Message) ([]types.TransactWriteItem, error) {
	return []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String("t"), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "1"}}}}}, nil
}

func TestTransactionalErrorsUnit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		errs      []error
		calls     int
		ok        bool
		permanent bool
	}{
		{"conflicts are resubmitted", []error{canceled("None", "TransactionConflict"), canceled("TransactionConflict", "None")}, 3, true, false},
		{"endless conflicts become a transient error", []error{canceled("TransactionConflict", "None"), canceled("TransactionConflict", "None"), canceled("TransactionConflict", "None"), canceled("TransactionConflict", "None")}, 4, false, false},
		{"throttling is transient", []error{canceled("ThrottlingError", "None")}, 1, false, false},
		{"validation is permanent", []error{canceled("ValidationError", "None")}, 1, false, true},
		{"ValidationException is permanent", []error{&smithy.GenericAPIError{Code: "ValidationException", Message: "item too large"}}, 1, false, true},
		{"other errors are transient", []error{&types.InternalServerError{}}, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTx{errs: tc.errs}
			s, err := dedupedynamo.New(dedupedynamo.Config{Client: f, Namespace: "unit"})
			if err != nil {
				t.Fatal(err)
			}
			err = dedupedynamo.Transactional(s, oneWrite, nil).Handle(context.Background(), msg("m", "k", "b"))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			var pe *consumer.PermanentError
			if errors.As(err, &pe) != tc.permanent {
				t.Fatalf("err = %v, want permanent=%v", err, tc.permanent)
			}
			if len(f.inputs) != tc.calls {
				t.Fatalf("%d calls, want %d", len(f.inputs), tc.calls)
			}
			for i, in := range f.inputs {
				if in.ClientRequestToken != nil {
					t.Fatalf("call %d carries a client request token", i)
				}
				for j := range i {
					if f.inputs[j] == in {
						t.Fatalf("calls %d and %d share one input: the second would replay the first", j, i)
					}
				}
			}
		})
	}
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("x"), false},
		{&types.ProvisionedThroughputExceededException{}, true},
		{&types.RequestLimitExceeded{}, true},
		{&types.InternalServerError{}, true},
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, true},
		{&types.ConditionalCheckFailedException{}, false},
		{canceled("ConditionalCheckFailed"), false},
		{canceled("None", "TransactionConflict"), true},
	} {
		if got := dedupedynamo.IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestVersionGuardStaleOnlyOnTheVersionClause: a guarded write's failed
// condition is stale only when the old item returned with the cancellation
// holds the message's version or a newer one; otherwise it is the write's
// own condition, a ConditionError, and nothing is committed.
func TestVersionGuardStaleOnlyOnTheVersionClause(t *testing.T) {
	t.Parallel()
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, tc := range []struct {
		name  string
		old   map[string]types.AttributeValue // the item when the condition failed
		stale bool
	}{
		{"stored version newer", map[string]types.AttributeValue{"v": n("8")}, true},
		{"stored version equal", map[string]types.AttributeValue{"v": n("7")}, true},
		{"stored version wider than int64", map[string]types.AttributeValue{"v": n("123456789012345678901234567890")}, true},
		{"stored version older", map[string]types.AttributeValue{"v": n("6")}, false},
		{"no stored version", map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "1"}}, false},
		{"stored version not a number", map[string]types.AttributeValue{"v": &types.AttributeValueMemberS{Value: "9"}}, false},
		{"no item", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
				{Code: aws.String("ConditionalCheckFailed"), Item: tc.old},
				{Code: aws.String("None")},
			}}
			f := &fakeTx{errs: []error{err}}
			s, serr := dedupedynamo.New(dedupedynamo.Config{Client: f, Namespace: "unit"})
			if serr != nil {
				t.Fatal(serr)
			}
			guarded := func(ctx context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
				ws, _ := oneWrite(ctx, m)
				return []types.TransactWriteItem{dedupedynamo.VersionGuard(ws[0], "v", 7)}, nil
			}
			got := dedupedynamo.Transactional(s, guarded, nil).Handle(context.Background(), msg("m", "k", "b"))
			var ce *dedupedynamo.ConditionError
			switch {
			case tc.stale && (got != nil || len(f.inputs) != 2 || len(f.inputs[1].TransactItems) != 1):
				t.Fatalf("stale: err %v after %d calls, want the dedupe record committed alone", got, len(f.inputs))
			case !tc.stale && (!errors.As(got, &ce) || len(f.inputs) != 1):
				t.Fatalf("own condition: err %v after %d calls, want a ConditionError and no commit", got, len(f.inputs))
			}
			if rv := f.inputs[0].TransactItems[0].Put.ReturnValuesOnConditionCheckFailure; rv != types.ReturnValuesOnConditionCheckFailureAllOld {
				t.Fatalf("guarded write asks for %q old values, want ALL_OLD", rv)
			}
		})
	}
}
