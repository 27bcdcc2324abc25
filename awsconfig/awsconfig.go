// Package awsconfig loads the AWS SDK configuration from the SDK's standard
// variables, so that one program runs unchanged against AWS, LocalStack
// and sqsonce's no-Docker local stack (fauxqs and DynamoDB Local).
//
//	cfg, err := awsconfig.Load(ctx) // AWS_REGION, AWS_ENDPOINT_URL_SQS, ... as the SDK reads them
//	sqsClient := sqs.NewFromConfig(cfg)
//	ddb := dynamoclient.New(cfg)  // package awsconfig/dynamoclient
//	s3Client := s3client.New(cfg) // package awsconfig/s3client: path-style on an emulator
//
// Endpoints come from the SDK's standard variables (AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL);
// unset, the clients talk to AWS. The DynamoDB and S3 client builders
// live in their own packages, so that an application links only the SDKs
// it uses (a PostgreSQL-only one, no DynamoDB); their settings for an
// emulator change nothing against AWS.
package awsconfig

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
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
