package leasekey_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqsonce/sqsonce/internal/leasekey"
)

func TestPK(t *testing.T) {
	if got := leasekey.PK("orders", "abc"); got != "orders#abc" {
		t.Fatalf("PK = %q", got)
	}
	long := string(make([]byte, 5000))
	a, b := leasekey.PK("orders", long), leasekey.PK("orders", long+"x")
	if len(a) > leasekey.MaxKeyBytes || a == b {
		t.Fatalf("long keys: %d bytes, distinct=%v", len(a), a != b)
	}
	if got := leasekey.PK(long, "k"); len(got) > leasekey.MaxKeyBytes {
		t.Fatalf("long namespace: %d bytes", len(got))
	}
}

func TestNewToken(t *testing.T) {
	a, b := leasekey.NewToken(), leasekey.NewToken()
	if len(a) != 32 || a == b {
		t.Fatalf("tokens %q and %q: want 32 hex digits, distinct", a, b)
	}
}

func FuzzPK(f *testing.F) {
	f.Add("orders", "abc", "abd")
	f.Add("", "", "x")
	f.Fuzz(func(t *testing.T, ns, a, b string) {
		pa, pb := leasekey.PK(ns, a), leasekey.PK(ns, b)
		if len(pa) > leasekey.MaxKeyBytes || len(pb) > leasekey.MaxKeyBytes {
			t.Fatalf("PK longer than %d bytes", leasekey.MaxKeyBytes)
		}
		if pa != leasekey.PK(ns, a) {
			t.Fatal("PK not deterministic")
		}
		if a != b && pa == pb {
			t.Fatalf("distinct keys %q and %q share PK %q", a, b, pa)
		}
	})
}

func TestTextPK(t *testing.T) {
	if got := leasekey.TextPK("n", "acct-1"); got != "n#acct-1" {
		t.Fatalf("TextPK = %q", got)
	}
	a, b, c := leasekey.TextPK("n", "\xff\xfe"), leasekey.TextPK("n", "\xff\xfd"), leasekey.TextPK("n", "a\x00b")
	for _, k := range []string{a, b, c} {
		if !utf8.ValidString(k) || strings.ContainsRune(k, 0) {
			t.Fatalf("TextPK left %q", k)
		}
	}
	if a == b {
		t.Fatal("two invalid keys collide")
	}
}
