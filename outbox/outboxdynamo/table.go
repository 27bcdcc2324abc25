package outboxdynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates the outbox table if it does not exist: on-demand
// billing, partition key pk (S) and sort key sk (S), TTL on expires_at. It
// waits until the table is ACTIVE and checks the key schema of a table
// that already existed. It is idempotent.
func CreateTable(ctx context.Context, client DynamoDBAPI, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("outbox/dynamo: create table %s: %w", table, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		out, err := client.DescribeTable(wctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var nf *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("outbox/dynamo: wait for table %s: %w", table, err)
		}
		if err == nil && out.Table.TableStatus == types.TableStatusActive {
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("outbox/dynamo: wait for table %s to become ACTIVE: %w", table, wctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := Check(ctx, client, table); err != nil {
		return err
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("outbox/dynamo: describe TTL of %s: %w", table, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == attrExpiresAt &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	if _, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrExpiresAt), Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("outbox/dynamo: enable TTL on %s.%s: %w", table, attrExpiresAt, err)
	}
	return nil
}

// Check verifies that the outbox table exists and is keyed by pk (S, HASH)
// and sk (S, RANGE): run it at start-up for a clear error.
func Check(ctx context.Context, client DynamoDBAPI, table string) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("outbox/dynamo: outbox table %q does not exist: create it with outboxdynamo.CreateTable (or the CloudFormation in the package docs), and check the name and region", table)
	}
	if err != nil {
		return fmt.Errorf("outbox/dynamo: describe outbox table %q: %w", table, err)
	}
	keys := map[string]types.KeyType{}
	for _, k := range out.Table.KeySchema {
		keys[aws.ToString(k.AttributeName)] = k.KeyType
	}
	if len(keys) != 2 || keys[attrPK] != types.KeyTypeHash || keys[attrSK] != types.KeyTypeRange {
		return fmt.Errorf("outbox/dynamo: outbox table %q has key schema %v: the outbox needs pk (S, HASH) and sk (S, RANGE); create it with outboxdynamo.CreateTable", table, keys)
	}
	return nil
}
