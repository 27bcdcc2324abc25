package idempg_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The examples run against the PostgreSQL of DATABASE_URL, and an
	// example cannot skip itself as the tests do (testenv): without the
	// server (`make test-unit` outside the stack) they are left out, and
	// they run wherever the tests run.
	if os.Getenv("DATABASE_URL") == "" {
		skip := "^Example"
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip = s + "|" + skip
		}
		_ = flag.Set("test.skip", skip)
	}
	goleak.VerifyTestMain(m)
}
