package dedupe_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wrap is the middleware of cfg with store, failing tb when New refuses it.
func wrap(tb testing.TB, store dedupe.Store, cfg dedupe.Config) consumer.Middleware {
	tb.Helper()
	cfg.Store = store
	m, err := dedupe.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return m.Wrap
}
