package dedupedynamo_test

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
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
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: l.client, Table: l.dedupe, Namespace: "ledger", NowFunc: l.clock,
		Logger: zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel))})
	if err != nil {
		t.Fatal(err)
	}
	h := dedupedynamo.Transactional(store, l.credit, nil)
	ctx := context.Background()
	if err := h.Handle(ctx, msg("m1", "k1", "alice:10")); err != nil {
		t.Fatal(err)
	}
	// A duplicate's error names the outcome once, with one prefix: it is
	// the settled line's error field.
	const dup = `dedupe: duplicate: key "k1" already completed`
	if err := h.Handle(ctx, msg("m1", "k1", "alice:10")); err == nil || err.Error() != dup {
		t.Errorf("duplicate: %v, want %q", err, dup)
	}
	if err := h.Handle(ctx, msg("m2", "k1", "alice:99")); err == nil {
		t.Fatal("key reuse: no error")
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
