package awslocal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsonce/sqsonce/localstack/awslocal" //nolint:staticcheck // the deprecated forwarder under test
)

// The deprecated names still build clients, through package awsconfig.
func TestForwards(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	if _, err := awslocal.Config(context.Background()); err == nil || !strings.Contains(err.Error(), "awsconfig: ") {
		t.Fatalf("Config without a region: %v, want awsconfig's error", err)
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1")
	var o dynamodb.Options
	awslocal.DynamoDBOptions(&o)
	if !o.DisableValidateResponseChecksum {
		t.Fatal("DynamoDBOptions with an endpoint set did not turn the checksum check off")
	}
}
