package dedupepg_test

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
)

// Key reuse in the transactional mode is logged once, at error level, but
// without the stack trace a production logger adds at that level: it is
// an outcome the handler reports (a dead letter), not a failure of the
// library, whose frames say nothing about the producer that reused the
// key.
func TestTransactionalKeyReuseLogsNoStack(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	l := newLedger(t)
	store, err := dedupepg.New(dedupepg.Config{DB: l.pool, Namespace: "ledger", Logger: zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel))})
	if err != nil {
		t.Fatal(err)
	}
	h := dedupepg.Transactional(store, l.credit, nil)
	if r := process(h, consumertest.NewMessage("x:1", consumertest.WithID("k-1"))); r.Outcome != consumer.OutcomeAck {
		t.Fatalf("first: %v (%v)", r.Outcome, r.Err)
	}
	// A duplicate's error names the outcome once, with one prefix: it is
	// the settled line's error field.
	const dup = `dedupe: duplicate: key "k-1" already completed`
	if r := process(h, consumertest.NewMessage("x:1", consumertest.WithID("k-1"))); r.Outcome != consumer.OutcomeDuplicate || r.Err == nil || r.Err.Error() != dup {
		t.Errorf("duplicate: %v (%v), want %q", r.Outcome, r.Err, dup)
	}
	if r := process(h, consumertest.NewMessage("x:2", consumertest.WithID("k-1"))); r.Class != consumer.ClassKeyReuse {
		t.Fatalf("key reuse: %v %q (%v)", r.Outcome, r.Class, r.Err)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Errorf("key reuse logged %d lines at error level, want 1", n)
	}
	for _, e := range logs.All() {
		if e.Stack != "" {
			t.Errorf("line %q (%s) carries a stack trace:\n%s", e.Message, e.Level, e.Stack)
		}
	}
}
