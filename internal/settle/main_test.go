package settle_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The table runs both runtimes, which start goroutines: none may outlive
// them. The SDK's HTTP client (the integration test) keeps idle
// connections open between tests; their goroutines belong to net/http.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
