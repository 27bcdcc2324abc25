// Package dynamoclient builds DynamoDB clients from an SDK configuration
// (see package awsconfig), with the settings the local stack needs and
// that change nothing against AWS. It is apart from awsconfig so that an
// application without DynamoDB does not link its SDK.
package dynamoclient

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Options turns off the SDK's check of the CRC32 response header
// when DynamoDB is an emulator (AWS_ENDPOINT_URL_DYNAMODB or
// AWS_ENDPOINT_URL is set). DynamoDB Local sends no such header on error
// responses, so without this the SDK logs "response did not match expected
// checksum" on every failed conditional write — which sqsonce makes on
// every duplicate. Against AWS it changes nothing.
func Options(o *dynamodb.Options) {
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" || os.Getenv("AWS_ENDPOINT_URL") != "" {
		o.DisableValidateResponseChecksum = true
	}
}

// New builds a DynamoDB client from cfg with [Options] and any other
// options given.
func New(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){Options}, optFns...)...)
}
