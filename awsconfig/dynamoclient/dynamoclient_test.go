package dynamoclient_test

import (
	"bytes"
	"context"
	"errors"
	"log"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithylog "github.com/aws/smithy-go/logging"

	"github.com/sqsonce/sqsonce/awsconfig"
	"github.com/sqsonce/sqsonce/awsconfig/dynamoclient"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// A failed conditional write against DynamoDB Local logs no checksum
// warning through a client built with Options, and does without it.
func TestNoChecksumWarningOnDynamoDBLocal(t *testing.T) {
	ddb := testenv.Dynamo(t) // fails or skips as the stack rule says
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	table := testenv.Table(t, ddb, "awsconfig", "pk", "")
	for _, withOptions := range []bool{false, true} {
		var logged bytes.Buffer
		opts := []func(*dynamodb.Options){func(o *dynamodb.Options) {
			o.Logger = smithylog.StandardLogger{Logger: log.New(&logged, "", 0)}
		}}
		if withOptions {
			opts = append(opts, dynamoclient.Options)
		}
		client := dynamodb.NewFromConfig(cfg, opts...)
		for range 2 {
			_, err = client.PutItem(context.Background(), &dynamodb.PutItemInput{
				TableName:           aws.String(table),
				Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			})
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("second conditional put: %v, want ConditionalCheckFailedException", err)
		}
		warned := strings.Contains(logged.String(), "checksum")
		if warned == withOptions {
			t.Fatalf("with Options=%v the SDK logged %q", withOptions, logged.String())
		}
	}
}
