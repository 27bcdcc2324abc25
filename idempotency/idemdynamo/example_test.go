package idemdynamo_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
)

// A credit API whose credit and stored response commit in one transaction.
// (Not run: it needs DynamoDB.)
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	if err := idemdynamo.CreateTable(ctx, client, idemdynamo.DefaultTable); err != nil {
		panic(err)
	}
	store, err := idemdynamo.New(idemdynamo.Config{Client: client})
	if err != nil {
		panic(err)
	}
	if err := store.Check(ctx); err != nil {
		panic(err)
	}
	mw, err := idempotency.New(idempotency.Config{
		Store:     store,
		ScopeFunc: func(r *http.Request) (string, error) { return r.Header.Get("X-Api-Key-Id"), nil },
	})
	if err != nil {
		panic(err)
	}
	http.Handle("POST /credits", mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			ID     string `json:"id"`
			Amount int64  `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil || c.ID == "" {
			idempotency.Release(r.Context()) // the corrected retry runs
			http.Error(w, "a credit needs an id and an amount", http.StatusBadRequest)
			return
		}
		err := idemdynamo.Transact(r.Context(), types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String("credits"),
			Item: map[string]types.AttributeValue{
				"id":     &types.AttributeValueMemberS{Value: c.ID},
				"amount": &types.AttributeValueMemberN{Value: strconv.FormatInt(c.Amount, 10)},
			},
		}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated) // sent once the credit and this response are committed
		_ = json.NewEncoder(w).Encode(c)
	})))
}
