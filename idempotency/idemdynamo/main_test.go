package idemdynamo_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The SDK's HTTP client keeps idle connections open between tests; their
// goroutines belong to net/http.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
