package dedupedynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates the dedupe table if it does not exist: on-demand
// billing, partition key pk (S), TTL enabled on expires_at. It waits until
// the table is ACTIVE and checks the key schema of a table that already
// existed. It is idempotent: run it from setup code or tests as often as
// you like.
func CreateTable(ctx context.Context, client DynamoDBAPI, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	if err := waitActive(ctx, client, table); err != nil {
		return err
	}
	if err := checkTable(ctx, client, table); err != nil {
		return err
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("dynamo: describe TTL of %s: %w", table, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == AttrExpiresAt &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrExpiresAt), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("dynamo: enable TTL on %s.%s: %w", table, AttrExpiresAt, err)
	}
	return nil
}

// waitActive polls DescribeTable until the table is ACTIVE, ctx is done, or
// two minutes pass.
func waitActive(ctx context.Context, client DynamoDBAPI, table string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var nf *types.ResourceNotFoundException
		switch {
		case err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive:
			return nil
		case err != nil && !errors.As(err, &nf):
			return fmt.Errorf("dynamo: wait for table %s: %w", table, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dynamo: wait for table %s to become ACTIVE: %w", table, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkTable verifies that the table exists and is keyed by pk (S, HASH)
// alone.
func checkTable(ctx context.Context, client DynamoDBAPI, table string) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("dynamo: dedupe table %q does not exist: create it with dedupedynamo.CreateTable (or the CloudFormation in the package docs), or set Config.Table to the right name (and check the region)", table)
	}
	if err != nil {
		return fmt.Errorf("dynamo: describe dedupe table %q: %w", table, err)
	}
	ok := len(out.Table.KeySchema) == 1 &&
		aws.ToString(out.Table.KeySchema[0].AttributeName) == AttrPK && out.Table.KeySchema[0].KeyType == types.KeyTypeHash
	if ok {
		ok = false
		for _, d := range out.Table.AttributeDefinitions {
			if aws.ToString(d.AttributeName) == AttrPK && d.AttributeType == types.ScalarAttributeTypeS {
				ok = true
			}
		}
	}
	if !ok {
		var got []string
		for _, k := range out.Table.KeySchema {
			got = append(got, fmt.Sprintf("%s %s", aws.ToString(k.AttributeName), k.KeyType))
		}
		return fmt.Errorf("dynamo: dedupe table %q has key schema %v: sqsonce needs a table whose only key is %q (type S, HASH); create one with dedupedynamo.CreateTable", table, got, AttrPK)
	}
	return nil
}
