package dedupedynamo_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The SDK's HTTP client keeps idle connections open between tests; their
// goroutines belong to net/http.
func TestMain(m *testing.M) {
	flag.Parse()
	// The examples run against the DynamoDB of AWS_ENDPOINT_URL_DYNAMODB,
	// and an example cannot skip itself as the tests do (testenv): without
	// the server (`make test-unit` outside the stack) they are left out,
	// and they run wherever the tests run.
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		skip := "^Example"
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip = s + "|" + skip
		}
		_ = flag.Set("test.skip", skip)
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
