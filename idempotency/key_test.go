package idempotency_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/idempotency"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", idempotency.MaxKeyLen)
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abc", true},
		{`"abc"`, "abc", true},
		{`"a\"b"`, `a"b`, true},
		{`a"b`, `a"b`, true},
		{`"a\\b"`, `a\b`, true},
		{`a\b`, `a\b`, true},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{long, long, true},
		{`"` + long + `"`, long, true},
		{"", "", false},
		{`""`, "", false},
		{`"`, "", false},
		{`"abc`, "", false},
		{`"a"b"`, "", false},
		{`"a\b"`, "", false},
		{`"abc\"`, "", false},
		{long + "k", "", false},
		{"a b", "", false},
		{`"a b"`, "a b", true},
		{`" "`, " ", true},
		{`" a \"b\" "`, ` a "b" `, true},
		{"\"a\tb\"", "", false},
		{"\"a\x7fb\"", "", false},
		{"\"cl\u00e9\"", "", false},
		{"\"a\nb\"", "", false},
		{"a\tb", "", false},
		{"clé", "", false},
		{"a\x7fb", "", false},
	} {
		got, ok := idempotency.ParseKey(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseKey(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseKey: no input panics; an accepted key is 1–255 printable ASCII
// characters (a space only in the quoted form), and its quoted form is the
// same key; an accepted bare key is itself.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `a"b`, `"`, `""`, `"a\b"`, "a b", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, ok := idempotency.ParseKey(in)
		if !ok {
			if key != "" {
				t.Fatalf("rejected %q but returned %q", in, key)
			}
			return
		}
		if len(key) < 1 || len(key) > idempotency.MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q: length %d", in, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x is not printable ASCII", in, key, key[i])
			}
		}
		if again, ok := idempotency.ParseKey(idempotency.QuoteKey(key)); !ok || again != key {
			t.Fatalf("quoted form %s of %q parsed as %q, %v", idempotency.QuoteKey(key), key, again, ok)
		}
		if !strings.HasPrefix(in, `"`) && (key != in || strings.Contains(key, " ")) {
			t.Fatalf("bare key %q parsed as %q", in, key)
		}
	})
}

// TestQuotedKeyWithSpaces: a quoted key may hold spaces (an RFC 8941
// string); it is a key like any other, distinct from its neighbours.
func TestQuotedKeyWithSpaces(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{}).Wrap(c)
	if w := post(h, http.MethodPost, "/x", `"order 17"`, "alice", ""); w.Code != http.StatusCreated {
		t.Fatalf(`key "order 17": %d %s`, w.Code, w.Body)
	}
	if w := post(h, http.MethodPost, "/x", `"order 17"`, "alice", ""); w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf(`retry of "order 17": %d, want a replay`, w.Code)
	}
	if w := post(h, http.MethodPost, "/x", `"order  17"`, "alice", ""); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf(`key "order  17": %d, want a run of its own`, w.Code)
	}
	if c.runs.Load() != 2 {
		t.Fatalf("runs %d, want 2", c.runs.Load())
	}
}
