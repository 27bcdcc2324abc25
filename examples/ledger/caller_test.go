package main

import (
	"net/http"
	"testing"
)

// The caller a bearer token names: the text before its first dot, or the
// whole token.
func TestCaller(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		auth, want string // want "" means 401
	}{
		{"Bearer alice.secret-1", "alice"},
		{"Bearer alice.secret-2", "alice"},
		{"Bearer alice", "alice"},
		{"Bearer alice.s.with.dots", "alice"},
		{"Bearer bob.secret-1", "bob"},
		{"Bearer .secret", ""},
		{"Bearer ", ""},
		{"Basic alice", ""},
		{"", ""},
	} {
		r, _ := http.NewRequest(http.MethodPost, "/credits", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		got, err := caller(r)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("caller(%q) = %q, %v; want %q", tc.auth, got, err, tc.want)
		}
	}
}
