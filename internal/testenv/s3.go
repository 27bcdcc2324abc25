package testenv

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3 returns a client for the stack's S3: AWS_ENDPOINT_URL_S3 when it is
// set, else AWS_ENDPOINT_URL_SQS (fauxqs serves S3 on its SQS port),
// addressed path-style as an emulator needs. The test fails or skips as
// [Config] does.
func S3(t testing.TB) *s3.Client {
	t.Helper()
	cfg := Config(t)
	endpoint := need(t, "AWS_ENDPOINT_URL_SQS")
	if os.Getenv("AWS_ENDPOINT_URL_S3") != "" {
		endpoint = need(t, "AWS_ENDPOINT_URL_S3")
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
}

// Bucket creates a uniquely named bucket, emptied and deleted when the
// test ends, and returns its name.
func Bucket(t testing.TB, client *s3.Client, prefix string) string {
	t.Helper()
	// Bucket names are lower case, 3 to 63 characters.
	name := strings.ToLower(strings.ReplaceAll(Name(prefix), "_", "-"))
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	name = strings.Trim(name, "-.")
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		var owned *s3types.BucketAlreadyOwnedByYou
		if !errors.As(err, &owned) {
			t.Fatalf("create bucket %s: %v", name, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
		if err == nil {
			for _, o := range out.Contents {
				_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: o.Key})
			}
		}
		_, _ = client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return name
}

// Objects lists the keys in bucket.
func Objects(t testing.TB, client *s3.Client, bucket string) []string {
	t.Helper()
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("list bucket %s: %v", bucket, err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}
