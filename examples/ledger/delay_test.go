package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDelayedCredits: credits sent with -not-before are applied once
// each, at or after their time (the journal's record of when each was
// first applied, read by `ledger audit`), by a worker given no flag for
// it; with -hop 5s SQS delays them 5 s and the worker holds them the rest
// of the way. On a FIFO ledger -not-before is refused with a clear error.
func TestDelayedCredits(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			l := newLedgerCLIStore(t, false, store)
			var later, now sendReport
			if err := json.Unmarshal([]byte(l.ok("send", "-n", "4", "-accounts", "2", "-not-before", "20s", "-hop", "5s", "-dup-rate", "0.5", "-json")), &later); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(l.ok("send", "-n", "3", "-accounts", "2", "-json")), &now); err != nil {
				t.Fatal(err)
			}
			due, err := time.Parse(time.RFC3339, later.NotBefore)
			if err != nil {
				t.Fatalf("send report %+v: %v", later, err)
			}
			l.work()
			if time.Now().Before(due) {
				t.Fatalf("the queue drained before the credits were due")
			}
			var audit auditReport
			if err := json.Unmarshal([]byte(l.ok("audit", "-json")), &audit); err != nil {
				t.Fatal(err)
			}
			if audit.Credits != 7 || audit.Total != later.Total+now.Total || audit.AppliedTwice != 0 || audit.Delayed != 4 || audit.Early != 0 {
				t.Errorf("audit %+v, want 7 credits totalling %d, none twice, 4 delayed, none early", audit, later.Total+now.Total)
			}
		})
	}
	t.Run("fifo refused", func(t *testing.T) {
		t.Parallel()
		l := newLedgerCLIStore(t, true, storeDynamoDB)
		code, _, stderr := l.run(context.Background(), "send", "-n", "1", "-not-before", "1m")
		if code == 0 || !strings.Contains(stderr, "not supported on FIFO queues") {
			t.Errorf("send -not-before on a FIFO ledger: exit %d, %q", code, stderr)
		}
	})
}
