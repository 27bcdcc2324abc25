// Package dynamotable creates and checks the DynamoDB tables of sqsonce's
// stores: on-demand billing, string keys, TTL on expires_at. The dedupe
// and idempotency stores share one schema (their tables may be one
// table); the outbox has its own.
package dynamotable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// API is the part of the DynamoDB client the table code calls.
type API interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Schema is a table's shape and how its errors name it.
type Schema struct {
	// Hash is the partition key (type S).
	Hash string
	// Range is the sort key (type S); "" for none.
	Range string
	// TTL is the attribute DynamoDB's TTL deletes items by.
	TTL string
	// Prefix starts every error ("dedupedynamo"), and names the package
	// whose CreateTable makes the table.
	Prefix string
	// What names the table in errors ("dedupe table").
	What string
}

// Lease is the schema of the lease-record table that the dedupe and
// idempotency stores share: partition key pk alone, TTL on expires_at.
func Lease(prefix, what string) Schema {
	return Schema{Hash: "pk", TTL: "expires_at", Prefix: prefix, What: what}
}

// Create creates the table if it does not exist, waits until it is ACTIVE,
// checks the key schema of a table that already existed and enables TTL.
// It is idempotent.
func Create(ctx context.Context, client API, table string, s Schema) error {
	defs := []types.AttributeDefinition{{AttributeName: aws.String(s.Hash), AttributeType: types.ScalarAttributeTypeS}}
	keys := []types.KeySchemaElement{{AttributeName: aws.String(s.Hash), KeyType: types.KeyTypeHash}}
	if s.Range != "" {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(s.Range), AttributeType: types.ScalarAttributeTypeS})
		keys = append(keys, types.KeySchemaElement{AttributeName: aws.String(s.Range), KeyType: types.KeyTypeRange})
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: defs,
		KeySchema:            keys,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("%s: create table %s: %w", s.Prefix, table, err)
	}
	if err := waitActive(ctx, client, table, s); err != nil {
		return err
	}
	if err := Check(ctx, client, table, s); err != nil {
		return err
	}
	on, err := TTLEnabled(ctx, client, table, s)
	if err != nil || on {
		return err
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(s.TTL), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("%s: enable TTL on %s.%s: %w", s.Prefix, table, s.TTL, err)
	}
	return nil
}

// TTLEnabled reports whether TTL is enabled (or being enabled) on the
// schema's TTL attribute.
func TTLEnabled(ctx context.Context, client API, table string, s Schema) (bool, error) {
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return false, fmt.Errorf("%s: describe TTL of %s: %w", s.Prefix, table, err)
	}
	d := out.TimeToLiveDescription
	return d != nil && aws.ToString(d.AttributeName) == s.TTL &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling), nil
}

// waitActive polls DescribeTable until the table is ACTIVE, ctx is done, or
// two minutes pass.
func waitActive(ctx context.Context, client API, table string, s Schema) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var nf *types.ResourceNotFoundException
		switch {
		case err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive:
			return nil
		case err != nil && !errors.As(err, &nf):
			return fmt.Errorf("%s: wait for table %s: %w", s.Prefix, table, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: wait for table %s to become ACTIVE: %w", s.Prefix, table, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Check verifies that the table exists and has exactly the schema's keys,
// with an error that says what to fix.
func Check(ctx context.Context, client API, table string, s Schema) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("%s: %s %q does not exist: create it with %s.CreateTable (or the CloudFormation in the package docs), or set Config.Table to the right name (and check the region)",
			s.Prefix, s.What, table, s.Prefix)
	}
	if err != nil {
		return fmt.Errorf("%s: describe %s %q: %w", s.Prefix, s.What, table, err)
	}
	if !keysMatch(out.Table, s) {
		var got []string
		for _, k := range out.Table.KeySchema {
			got = append(got, fmt.Sprintf("%s %s", aws.ToString(k.AttributeName), k.KeyType))
		}
		return fmt.Errorf("%s: %s %q has key schema %v: sqsonce needs a table keyed by %s; create one with %s.CreateTable",
			s.Prefix, s.What, table, got, s.want(), s.Prefix)
	}
	return nil
}

// want describes the schema's keys.
func (s Schema) want() string {
	w := fmt.Sprintf("%q (type S, HASH)", s.Hash)
	if s.Range != "" {
		w += fmt.Sprintf(" and %q (type S, RANGE)", s.Range)
	} else {
		w += " alone"
	}
	return w
}

// keysMatch reports whether t is keyed by exactly the schema's keys, both
// strings.
func keysMatch(t *types.TableDescription, s Schema) bool {
	want := map[string]types.KeyType{s.Hash: types.KeyTypeHash}
	if s.Range != "" {
		want[s.Range] = types.KeyTypeRange
	}
	if t == nil || len(t.KeySchema) != len(want) {
		return false
	}
	for _, k := range t.KeySchema {
		if want[aws.ToString(k.AttributeName)] != k.KeyType {
			return false
		}
	}
	strs := map[string]bool{}
	for _, d := range t.AttributeDefinitions {
		if d.AttributeType == types.ScalarAttributeTypeS {
			strs[aws.ToString(d.AttributeName)] = true
		}
	}
	for name := range want {
		if !strs[name] {
			return false
		}
	}
	return true
}
