package testenv

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// StoreTable creates a uniquely named table with a store's own CreateTable
// (create, which takes the store's own client interface, API), deleted when
// the test ends, and returns a client for the stack's DynamoDB and the
// table's name.
func StoreTable[API any](t testing.TB, prefix string, create func(ctx context.Context, client API, table string) error) (*dynamodb.Client, string) {
	t.Helper()
	client := Dynamo(t)
	name := Name(prefix)
	api, ok := any(client).(API)
	if !ok {
		t.Fatalf("StoreTable: a DynamoDB client is not a %T", api)
	}
	if err := create(context.Background(), api, name); err != nil {
		t.Fatalf("CreateTable %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return client, name
}

// Item reads the item whose string hash key "pk" is pk with a consistent
// read (nil when there is none), failing the test when the read fails.
func Item(t testing.TB, client *dynamodb.Client, table, pk string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
	})
	if err != nil {
		t.Fatalf("get %s: %v", pk, err)
	}
	return out.Item
}

// Scalar returns a string or number attribute's text, and "" for any other
// kind (or a missing attribute).
func Scalar(v ddbtypes.AttributeValue) string {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return v.Value
	case *ddbtypes.AttributeValueMemberN:
		return v.Value
	}
	return ""
}
