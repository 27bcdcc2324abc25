package dedupe_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
)

// stackLogger is a logger that, like zap.NewProduction's, adds a stack
// trace to every line at error level and above.
func stackLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel)), logs
}

// noStacks fails for every line that carries a stack trace: key reuse is
// an outcome the middleware handles (a dead letter, logged loudly), and a
// stack of the library's own frames says nothing about the producer that
// reused the key.
func noStacks(t *testing.T, logs *observer.ObservedLogs) {
	t.Helper()
	for _, e := range logs.All() {
		if e.Stack != "" {
			t.Errorf("line %q (%s) carries a stack trace:\n%s", e.Message, e.Level, e.Stack)
		}
	}
}

// Key reuse is logged once, at error level, without a stack trace.
func TestKeyReuseLogsNoStack(t *testing.T) {
	t.Parallel()
	log, logs := stackLogger()
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "mw"})
	h := consumer.Chain(consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		wrap(t, store, dedupe.Config{Lease: 30 * time.Second, Logger: log}))
	ctx := context.Background()
	if err := h.Handle(ctx, message("m1", "k1", "one body")); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(ctx, message("m2", "k1", "another body")); err == nil {
		t.Fatal("key reuse: no error")
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Errorf("key reuse logged %d lines at error level, want 1", n)
	}
	noStacks(t, logs)
}
