package dedupe_test

import (
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
)

func TestMemoryConformance(t *testing.T) {
	dedupetest.Run(t, func(t *testing.T, now func() time.Time) dedupe.Store {
		return dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "test", NowFunc: now})
	})
}

func TestPK(t *testing.T) {
	if got := dedupe.PK("orders", "abc"); got != "orders#abc" {
		t.Fatalf("PK = %q", got)
	}
	long := string(make([]byte, 5000))
	a, b := dedupe.PK("orders", long), dedupe.PK("orders", long+"x")
	if len(a) > dedupe.MaxKeyBytes || a == b {
		t.Fatalf("long keys: %d bytes, distinct=%v", len(a), a != b)
	}
	if got := dedupe.PK(long, "k"); len(got) > dedupe.MaxKeyBytes {
		t.Fatalf("long namespace: %d bytes", len(got))
	}
}
