package dedupedynamo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
)

// A credit applied exactly once: the handler returns its balance update,
// and Transactional commits it together with the message's dedupe record.
// The same message delivered again is a duplicate, and the balance moves
// once.
func ExampleTransactional() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("example-%x", rand.Uint64()) // the example's own table
	if err := dedupedynamo.CreateTable(ctx, client, table); err != nil {
		panic(err)
	}
	defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}) //nolint:errcheck
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: client, Table: table, Namespace: "credits"})
	if err != nil {
		panic(err)
	}

	// The accounts share the dedupe table here (pk "account#<id>"); any
	// table works.
	handler := dedupedynamo.Transactional(store, func(ctx context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		var c struct {
			Account string `json:"account"`
			Amount  int64  `json:"amount"`
		}
		if err := json.Unmarshal([]byte(m.Body), &c); err != nil {
			return nil, consumer.Permanent(err)
		}
		return []types.TransactWriteItem{{Update: &types.Update{
			TableName:        aws.String(table),
			Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "account#" + c.Account}},
			UpdateExpression: aws.String("ADD balance :amount"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":amount": &types.AttributeValueMemberN{Value: strconv.FormatInt(c.Amount, 10)},
			},
		}}}, nil
	}, nil)

	body := `{"account":"alice","amount":10}`
	first := consumertest.NewMessage(body, consumertest.WithID("m-1"))
	again := consumertest.NewMessage(body, consumertest.WithID("m-1"), consumertest.WithReceiveCount(2)) // redelivered
	fmt.Println(consumertest.Process(ctx, handler, first).Outcome)
	fmt.Println(consumertest.Process(ctx, handler, again).Outcome)

	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "account#alice"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("balance:", out.Item["balance"].(*types.AttributeValueMemberN).Value)
	// Output:
	// ack
	// duplicate
	// balance: 10
}

// Profile updates that can arrive out of order: VersionGuard applies an
// update only when its version is newer than the stored one. The late
// version 1 is stale: its write is skipped, and the message is acked and
// recorded as done, so a redelivery of it is a duplicate.
func ExampleVersionGuard() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("example-%x", rand.Uint64()) // the example's own table
	if err := dedupedynamo.CreateTable(ctx, client, table); err != nil {
		panic(err)
	}
	defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}) //nolint:errcheck
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: client, Table: table, Namespace: "profiles"})
	if err != nil {
		panic(err)
	}

	type profileChanged struct {
		User    string `json:"user"`
		Name    string `json:"name"`
		Version int64  `json:"version"`
	}
	key := func(user string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "profile#" + user}}
	}
	handler := dedupedynamo.Transactional(store, func(ctx context.Context, m *consumer.Message) ([]types.TransactWriteItem, error) {
		var e profileChanged
		if err := json.Unmarshal([]byte(m.Body), &e); err != nil {
			return nil, consumer.Permanent(err)
		}
		set := types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(table),
			Key:                       key(e.User),
			UpdateExpression:          aws.String("SET #name = :name"),
			ExpressionAttributeNames:  map[string]string{"#name": "name"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":name": &types.AttributeValueMemberS{Value: e.Name}},
		}}
		return []types.TransactWriteItem{dedupedynamo.VersionGuard(set, "version", e.Version)}, nil
	}, nil)

	for i, e := range []profileChanged{{"7", "Bob", 2}, {"7", "Robert", 1}, {"7", "Rob", 3}} {
		body, _ := json.Marshal(e)
		res := consumertest.Process(ctx, handler, consumertest.NewMessage(string(body), consumertest.WithID(fmt.Sprint("m-", i))))
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("7"), ConsistentRead: aws.Bool(true)})
		if err != nil {
			panic(err)
		}
		fmt.Printf("version %d %q: %s; stored: %s, version %s\n", e.Version, e.Name, res.Outcome,
			out.Item["name"].(*types.AttributeValueMemberS).Value, out.Item["version"].(*types.AttributeValueMemberN).Value)
	}
	// Output:
	// version 2 "Bob": ack; stored: Bob, version 2
	// version 1 "Robert": ack; stored: Bob, version 2
	// version 3 "Rob": ack; stored: Rob, version 3
}
