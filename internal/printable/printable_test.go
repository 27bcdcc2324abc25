package printable_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqsonce/sqsonce/internal/printable"
)

// hostile reports a rune a terminal may act on rather than show (and a
// byte that is not UTF-8).
func hostile(r rune, size int) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		(r == utf8.RuneError && size == 1)
}

// firstHostile returns the index of the first hostile rune of s, or -1.
func firstHostile(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if hostile(r, size) {
			return i
		}
		i += size
	}
	return -1
}

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain text, ünïcode ✓ 日本", "plain text, ünïcode ✓ 日本"},
		{"\x1b]0;owned\x07\x1b[2J", `\x1b]0;owned\a\x1b[2J`},
		{"a\rb\nc\td", `a\rb\nc\td`},
		{"\x7f\u0080\u009b\u009f", `\x7f\u0080\u009b\u009f`},
		{"\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069`},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`},
		{`already \x1b escaped`, `already \x1b escaped`},
		{"\U000e0001 tag", `\U000e0001 tag`},
	} {
		if got := printable.Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := printable.Lines("one\r\ntwo\x1b[1A\n"); got != "one\\r\ntwo\\x1b[1A\n" {
		t.Errorf("Lines = %q", got)
	}
	if got := printable.Quote("\x1b[2Jhttps://sqs/1/q", 5); got != `"\x1b[2Jh…"` {
		t.Errorf("Quote = %s", got)
	}
	if got := printable.Quote("ab✓", 4); got != `"ab…"` {
		t.Errorf("Quote cut inside a rune = %s", got)
	}
}

// FuzzEscape: whatever the input, no escaped line holds a hostile rune,
// escaping twice changes nothing, text that needs nothing is unchanged,
// and the JSON form decodes to the same value as encoding/json's.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "ok", "\x1b[31mred\x1b[0m", "\r\n\t", "\u009b\u202e\u2069", "\xff", "\\x1b", "\U0010ffff", "\ufffd", "\U000e0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := printable.Escape(s)
		if i := firstHostile(e); i >= 0 {
			t.Fatalf("Escape(%q) = %q holds a hostile rune at %d", s, e, i)
		}
		if again := printable.Escape(e); again != e {
			t.Fatalf("Escape(Escape(%q)) = %q, want %q", s, again, e)
		}
		if firstHostile(s) < 0 && utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !printable.Shown(r) }) && e != s {
			t.Fatalf("Escape(%q) = %q changed shown text", s, e)
		}
		for _, line := range strings.Split(printable.Lines(s), "\n") {
			if i := firstHostile(line); i >= 0 {
				t.Fatalf("Lines(%q) has line %q with a hostile rune at %d", s, line, i)
			}
		}
		if q := printable.Quote(s, 40); firstHostile(q) >= 0 {
			t.Fatalf("Quote(%q) = %q holds a hostile rune", s, q)
		}
		b, _ := json.Marshal(map[string]string{"v": s})
		j := printable.JSON(b)
		if i := firstHostile(string(j)); i >= 0 {
			t.Fatalf("JSON(%s) = %s holds a hostile rune at %d", b, j, i)
		}
		var before, after map[string]string
		if err := json.Unmarshal(b, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(j, &after); err != nil || after["v"] != before["v"] {
			t.Fatalf("JSON(%s) = %s decodes to %q (%v), want %q", b, j, after["v"], err, before["v"])
		}
	})
}
