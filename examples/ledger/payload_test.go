package main

import (
	"encoding/json"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestLargeAndCompressedCredits: credits with a 2 MiB memo go through
// S3, compressed credits go compressed, and `ledger work`, with no flag,
// applies each once.
func TestLargeAndCompressedCredits(t *testing.T) {
	t.Parallel()
	l := newLedgerCLIStore(t, false, storeDynamoDB)
	var big, small sendReport
	if err := json.Unmarshal([]byte(l.ok("send", "-n", "4", "-accounts", "2", "-memo-bytes", "2097152", "-dup-rate", "0.5", "-json")), &big); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(l.ok("send", "-n", "6", "-accounts", "2", "-memo-bytes", "10240", "-compress", "-json")), &small); err != nil {
		t.Fatal(err)
	}
	// Each 2 MiB credit (a duplicate is a second send: its own object)
	// is one object; the compressed ones fit in a message.
	if keys := testenv.Objects(t, testenv.S3(t), l.names().Bucket); len(keys) != big.Distinct+big.Duplicates {
		t.Errorf("%d objects in the bucket, want %d", len(keys), big.Distinct+big.Duplicates)
	}
	l.work()
	var audit auditReport
	if err := json.Unmarshal([]byte(l.ok("audit", "-json")), &audit); err != nil {
		t.Fatal(err)
	}
	if want := big.Distinct + small.Distinct; audit.Credits != want || audit.Total != big.Total+small.Total || audit.AppliedTwice != 0 {
		t.Errorf("audit %+v, want %d credits totalling %d, none twice", audit, want, big.Total+small.Total)
	}
	var st queueStatus
	_ = json.Unmarshal([]byte(l.ok("status", "-json")), &st)
	if st.DLQVisible != 0 {
		t.Errorf("%d credits in the DLQ, want none", st.DLQVisible)
	}
}
