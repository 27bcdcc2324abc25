package idempotency

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHashesStable: record keys and fingerprints are stored, so the bytes
// they hash and how must never change: a record written before an upgrade
// must be found, and its fingerprint match, after it.
func TestHashesStable(t *testing.T) {
	if got, want := RecordKey("alice", "order-1"), "893c92eff7a0c3c9887b458d29b7a563b339c7f937f597637e2aec61c8eb7936"; got != want {
		t.Errorf("RecordKey = %s, want %s", got, want)
	}
	m := &Middleware{fphdrs: []string{"X-Tenant", "X-Empty"}}
	r := httptest.NewRequest("POST", "/credits/a%2Fb?z=1&a=2&a=1", strings.NewReader(""))
	r.Header.Add("X-Tenant", "t1")
	r.Header.Add("X-Tenant", "t2")
	if got, _ := m.fingerprint(r, []byte(`{"amount":500}`)); got != "517a69ec7a5cfecc8ce107f23e27b2a7c7d4b4bd9ca7173414087f7c804c755a" {
		t.Errorf("fingerprint with headers = %s", got)
	}
	if got, _ := (&Middleware{}).fingerprint(httptest.NewRequest("PATCH", "/x", nil), nil); got != "e75c7afb1305deafb19dc55589e3c6329d1be13acdeeabc00ea78ca5ff756d6d" {
		t.Errorf("fingerprint of an empty request = %s", got)
	}
}
