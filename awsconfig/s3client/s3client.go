// Package s3client builds S3 clients from an SDK configuration (see
// package awsconfig), addressing buckets path-style on an emulator, and
// creates buckets. It is apart from awsconfig so that an application
// without S3 does not link its SDK.
package s3client

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Options addresses buckets path-style (http://host:port/bucket/key)
// when S3 is an emulator (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL is
// set): fauxqs and LocalStack serve S3 on one host name, where the
// SDK's default virtual-hosted style (http://bucket.host:port/key)
// names a host that does not resolve. Against AWS it changes nothing.
func Options(o *s3.Options) {
	if os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != "" {
		o.UsePathStyle = true
	}
}

// New builds an S3 client from cfg with [Options] and any other
// options given.
func New(cfg aws.Config, optFns ...func(*s3.Options)) *s3.Client {
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){Options}, optFns...)...)
}

// BucketAPI is the S3 call [EnsureBucket] makes. *s3.Client satisfies it.
type BucketAPI interface {
	CreateBucket(ctx context.Context, in *s3.CreateBucketInput, optFns ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
}

// EnsureBucket creates the bucket in region unless this account has it
// already (a bucket outside us-east-1 is created with its location, as
// S3 requires).
func EnsureBucket(ctx context.Context, client BucketAPI, name, region string) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	_, err := client.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	var ae smithy.APIError
	switch {
	case err == nil, errors.As(err, &owned):
		return nil
	case errors.As(err, &ae) && ae.ErrorCode() == "BucketAlreadyOwnedByYou":
		return nil
	}
	return fmt.Errorf("s3client: create bucket %s: %w", name, err)
}
