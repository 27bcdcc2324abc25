package s3client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sqsonce/sqsonce/awsconfig"
	"github.com/sqsonce/sqsonce/awsconfig/s3client"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// A client from S3 reaches the local stack's S3 (path-style), and
// EnsureBucket is idempotent.
func TestS3OnLocalStack(t *testing.T) {
	testenv.S3(t) // fails or skips as the stack rule says
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	client := s3client.New(cfg)
	ctx := context.Background()
	bucket := strings.ToLower(testenv.Name("awsconfig"))
	for range 2 {
		if err := s3client.EnsureBucket(ctx, client, bucket, cfg.Region); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
		_, _ = client.DeleteBucket(context.Background(), &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatalf("put through a client from awsconfig.S3: %v", err)
	}
}
