package consumer

import (
	"regexp"
	"testing"
)

// TestNewAttemptID: an attempt id is 32 hex digits (SQS allows up to 128
// alphanumeric and punctuation characters), fresh on every call, and costs
// one allocation.
func TestNewAttemptID(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := newAttemptID()
		if !hex32.MatchString(id) {
			t.Fatalf("attempt id %q is not 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("attempt id %q repeated", id)
		}
		seen[id] = true
	}
	if n := testing.AllocsPerRun(100, func() { _ = newAttemptID() }); n > 1 {
		t.Errorf("newAttemptID allocates %.0f times, want 1", n)
	}
}
