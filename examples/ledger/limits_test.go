package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestWorkLimits: two workers of one ledger with `work -rate 20
// -account-concurrency 1` charge 80 credits of 4 accounts at the bank
// (each charge taking 50 ms). Together, through the ledger's store, they
// charge at most 20 a second (the bank's per_second, plus the one slot a
// fleet may spend at once and a charge's jitter across a second's
// boundary) and never two of one account at once (the bank's
// max_concurrent), on DynamoDB and on PostgreSQL; every credit is charged
// once.
func TestWorkLimits(t *testing.T) {
	t.Parallel()
	for _, store := range []string{storeDynamoDB, storePostgres} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			l := newLedgerCLIStore(t, false, store)
			b, srv := startTestBank(t, bankConfig{Delay: 50 * time.Millisecond})
			l.ok("send", "-n", "80", "-accounts", "4")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type exit struct {
				code   int
				stderr string
			}
			done := make(chan exit, 2)
			for range 2 {
				go func() {
					code, _, stderr := l.run(ctx, "work", "-concurrency", "8", "-wait", "1s", "-bank", srv.URL,
						"-rate", "20", "-account-concurrency", "1")
					done <- exit{code, stderr}
				}()
			}
			deadline := time.Now().Add(2 * time.Minute)
			for {
				var st queueStatus
				if err := json.Unmarshal([]byte(l.ok("status", "-json")), &st); err != nil {
					t.Fatal(err)
				}
				if st.QueueDrained {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("queue not drained: %+v", st)
				}
				time.Sleep(500 * time.Millisecond)
			}
			cancel()
			for range 2 {
				if e := <-done; e.code != 0 {
					t.Fatalf("work exited %d:\n%s", e.code, lastLines(e.stderr, 20))
				}
			}
			s := b.stats()
			if s.Refs != 80 || s.Duplicates != 0 {
				t.Errorf("the bank charged %d credits (%d twice), want 80 once each", s.Refs, s.Duplicates)
			}
			if s.MaxConcurrentAccount != 1 {
				t.Errorf("at most %d charges of one account at once (%v), want 1", s.MaxConcurrentAccount, s.MaxConcurrent)
			}
			for sec, n := range s.PerSecond {
				if n > 20+2 {
					t.Errorf("second %d: %d charges, above the rate (20)", sec, n)
				}
			}
			t.Logf("charges per second %v, most of an account at once %d", s.PerSecond, s.MaxConcurrentAccount)
		})
	}
}

// TestLedgerHelpListsLimits: `ledger help` shows work's limits.
func TestLedgerHelpListsLimits(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, want := range []string{"[-rate N]", "[-account-concurrency K]", "[-adaptive]"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestWorkLimitsUsage: bad limits are usage errors, before any call.
func TestWorkLimitsUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-rate", "-1"}, {"-rate", "NaN"}, {"-account-concurrency", "-2"}, {"-adaptive"}} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), append([]string{"work"}, args...), &stdout, &stderr); code != 2 {
			t.Errorf("work %v: exit %d, want 2 (usage)\n%s", args, code, stderr.String())
		}
	}
}
