package awsconfig_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/awsconfig"
)

// Without a region Load fails with an error that says what to set.
func TestLoadWithoutRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	_, err := awsconfig.Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), "set AWS_REGION") {
		t.Fatalf("Load without a region: %v, want an error saying to set AWS_REGION", err)
	}
}
