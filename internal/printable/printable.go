// Package printable shows outside text to people. Whatever a message, a
// producer or a server wrote may hold runes a terminal acts on rather than
// shows (an ANSI or OSC escape sequence, a carriage return, a bidi
// override) and so rewrite what a person reads; the functions here escape
// every such rune, as a Go string literal would, and keep the rest as it
// is.
//
//	fmt.Fprintf(w, "error:     %s\n", printable.Escape(f.Error))
package printable

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Shown reports whether r is shown as itself: a rune strconv.IsPrint
// accepts (letters, marks, numbers, punctuation, symbols and the ASCII
// space). Every other rune is escaped: C0 controls (tab and line breaks
// included), DEL, C1 controls (U+0080–U+009F), the bidi embeddings,
// overrides and isolates (U+202A–U+202E, U+2066–U+2069) and every other
// format or separator character.
func Shown(r rune) bool {
	return strconv.IsPrint(r) && r != 0x7f && !(r >= 0x80 && r <= 0x9f) &&
		!(r >= 0x202a && r <= 0x202e) && !(r >= 0x2066 && r <= 0x2069)
}

// Escape returns s with every rune that is not [Shown] written as its Go
// escape (\x1b, \r, \t, \u009b, \u202e) and every byte that is not UTF-8
// as \xNN; the rest is unchanged, without quotes. Backslashes are kept, so
// that Escape of escaped text (a note holding a [Quote]) is the same text:
// Escape(Escape(s)) == Escape(s).
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !Shown(r) || (r == utf8.RuneError && size == 1) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			const hex = "0123456789abcdef"
			b.WriteString(`\x`)
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&0xf])
		case Shown(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// Lines is [Escape] for text of several lines, such as a message body:
// each line is escaped and the line feeds between them are kept.
func Lines(s string) string {
	if !strings.Contains(s, "\n") {
		return Escape(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

// Quote returns s as a Go string literal (strconv.Quote: in double quotes,
// every rune that is not printable escaped), cut first to at most n bytes
// at a rune boundary and marked with "…" when longer (n ≤ 0: not cut).
// It is the form for outside text inside a sentence, such as a note.
func Quote(s string, n int) string {
	if n > 0 && len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return Escape(strconv.Quote(s))
}

// JSON escapes, in JSON text made by encoding/json, the runes that JSON
// leaves raw and a terminal may act on (DEL, C1 controls, the bidi
// controls; encoding/json already escapes the C0 controls, U+2028 and
// U+2029), as \uXXXX: the JSON means the same and prints safely. Every
// such rune is inside a string, where JSON allows the escape.
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		if !jsonShown(r) {
			break
		}
		i += size
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case jsonShown(r):
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = appendU(appendU(out, r1), r2)
		default:
			out = appendU(out, r)
		}
		i += size
	}
	return out
}

// appendU appends the JSON escape \uXXXX of a rune of the BMP.
func appendU(out []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(out, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

// jsonShown reports a rune JSON output may carry raw.
func jsonShown(r rune) bool {
	return r < 0x7f || (r > 0x9f && r != utf8.RuneError && Shown(r))
}
