// Package dynamohttp is [sdkhttp.Guard] as a per-call option of the
// DynamoDB client. It is apart from package sdkhttp so that a program
// without DynamoDB (the consumer, the producer, the PostgreSQL stores)
// does not link the DynamoDB SDK.
package dynamohttp

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
)

// Guard is a per-call option that guards the call's HTTP client.
func Guard(o *dynamodb.Options) { o.HTTPClient = sdkhttp.Guard(o.HTTPClient) }
