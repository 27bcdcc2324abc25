package settle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
)

// The dead-letter line at warning level (what a production logger at
// info level keeps) says why, not only the class: the handler's error
// text, escaped (it is outside text: here a terminal escape sequence and
// a line break) and cut short; never the body.
func TestDeadLetterLogCarriesReason(t *testing.T) {
	t.Parallel()
	const body = "m1 secret-body"
	hostile := "card \x1b[31mdeclined\r\nfake line " + strings.Repeat("x", 4000)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newRig(false, nil)
				r.f.Put(r.url, body, "")
				core, logs := observer.New(zapcore.InfoLevel)
				r.log = zap.New(core)
				r.handler = consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
					return consumer.Permanent(errors.New(hostile))
				})
				rt.run(t, r)
				lines := logs.FilterMessageSnippet("dead-lettered").All()
				if len(lines) != 1 {
					t.Fatalf("%d dead-lettered lines, want 1: %v", len(lines), logs.All())
				}
				fields := lines[0].ContextMap()
				reason, _ := fields["reason"].(string)
				if !strings.HasPrefix(reason, `card \x1b[31mdeclined\r\nfake line xxx`) {
					t.Errorf("reason field = %.80q, want the error text, escaped", reason)
				}
				if len(reason) > 1100 {
					t.Errorf("reason field is %d bytes, want it cut short", len(reason))
				}
				for _, e := range logs.All() {
					for k, v := range e.ContextMap() {
						if s, ok := v.(string); ok && strings.Contains(s, "secret-body") {
							t.Errorf("line %q: field %s holds the body", e.Message, k)
						}
					}
				}
			})
		})
	}
}

// A duplicate's settled line names the outcome once, with one prefix:
// not the chain of every layer's prefix ("dedupe: key …: consumer:
// duplicate: already completed").
func TestDuplicateLogIsOneLine(t *testing.T) {
	t.Parallel()
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newRig(false, nil)
				r.f.Put(r.url, m1, "")
				c, err := r.store.Claim(context.Background(), m1, dedupe.Fingerprint(m1), time.Minute)
				if err == nil {
					err = r.store.Complete(context.Background(), m1, c.Token)
				}
				if err != nil {
					t.Fatal(err)
				}
				core, logs := observer.New(zapcore.DebugLevel)
				r.log = zap.New(core)
				r.handler = consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
					return errors.New("ran a completed message")
				})
				rt.run(t, r)
				lines := logs.FilterMessage(consumer.SettledMessage).All()
				if len(lines) != 1 {
					t.Fatalf("%d settled lines, want 1", len(lines))
				}
				fields := lines[0].ContextMap()
				const want = `dedupe: duplicate: key "m1" already completed`
				if fields["outcome"] != "duplicate" || fields["error"] != want {
					t.Errorf("settled line: outcome %v, error %q; want duplicate, %q", fields["outcome"], fields["error"], want)
				}
				for _, e := range logs.All() {
					if e.Level < zapcore.InfoLevel {
						continue
					}
					for k, v := range e.ContextMap() {
						if s, ok := v.(string); ok && strings.Contains(s, "duplicate") {
							t.Errorf("line %q at %s: field %s = %q; a duplicate is logged by the debug settled line only", e.Message, e.Level, k, s)
						}
					}
				}
			})
		})
	}
}
