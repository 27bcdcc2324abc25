// Package awsconfig loads the AWS SDK configuration from the SDK's standard
// variables, so that one program runs unchanged against AWS, LocalStack
// and sqsonce's no-Docker local stack (fauxqs and DynamoDB Local).
//
//	cfg, err := awsconfig.Load(ctx) // AWS_REGION, AWS_ENDPOINT_URL_SQS, ... as the SDK reads them
//	sqsClient := sqs.NewFromConfig(cfg)
//	ddb := dynamodb.NewFromConfig(cfg, awsconfig.DynamoDBOptions)
//	s3Client := awsconfig.S3(cfg) // path-style on an emulator
//
// Endpoints come from the SDK's standard variables (AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL);
// unset, the clients talk to AWS. Nothing here is specific to an emulator
// but [DynamoDBOptions] and [S3Options], which change nothing against
// AWS.
package awsconfig

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Load loads the default SDK configuration (config.LoadDefaultConfig with
// optFns) and checks that it names a region, with an error that says what
// to set.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsconfig: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("awsconfig: no AWS region: set AWS_REGION (the local stack's .stack/env sets it)")
	}
	return cfg, nil
}

// DynamoDBOptions turns off the SDK's check of the CRC32 response header
// when DynamoDB is an emulator (AWS_ENDPOINT_URL_DYNAMODB or
// AWS_ENDPOINT_URL is set). DynamoDB Local sends no such header on error
// responses, so without this the SDK logs "response did not match expected
// checksum" on every failed conditional write — which sqsonce makes on
// every duplicate. Against AWS it changes nothing.
func DynamoDBOptions(o *dynamodb.Options) {
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" || os.Getenv("AWS_ENDPOINT_URL") != "" {
		o.DisableValidateResponseChecksum = true
	}
}
