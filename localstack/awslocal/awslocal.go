// Package awslocal is the former name of package awsconfig, which loads
// the AWS SDK configuration from the standard variables.
//
// Deprecated: use github.com/sqsonce/sqsonce/awsconfig: awslocal.Config
// is awsconfig.Load, awslocal.DynamoDBOptions is awsconfig.DynamoDBOptions.
package awslocal

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/awsconfig"
)

// Config is [awsconfig.Load].
//
// Deprecated: use awsconfig.Load.
func Config(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	return awsconfig.Load(ctx, optFns...)
}

// DynamoDBOptions is [awsconfig.DynamoDBOptions].
//
// Deprecated: use awsconfig.DynamoDBOptions.
func DynamoDBOptions(o *dynamodb.Options) { awsconfig.DynamoDBOptions(o) }
