// Package awslocal is the former name of package awsconfig, which loads
// the AWS SDK configuration from the standard variables.
//
// Deprecated: use github.com/sqsonce/sqsonce/awsconfig: awslocal.Config
// is awsconfig.Load, awslocal.DynamoDBOptions is dynamoclient.Options.
package awslocal

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/awsconfig"
	"github.com/sqsonce/sqsonce/awsconfig/dynamoclient"
)

// Config is [awsconfig.Load].
//
// Deprecated: use awsconfig.Load.
func Config(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	return awsconfig.Load(ctx, optFns...)
}

// DynamoDBOptions is [dynamoclient.Options].
//
// Deprecated: use dynamoclient.Options.
func DynamoDBOptions(o *dynamodb.Options) { dynamoclient.Options(o) }
