package idempotency

import "strings"

// MaxKeyLen is the longest key accepted, in characters.
const MaxKeyLen = 255

// ParseKey parses an Idempotency-Key header value: 1 to 255 characters,
// either bare (visible ASCII, 0x21–0x7E: abc) or in the IETF draft's form,
// an RFC 8941 structured-field string ("abc": printable ASCII, 0x20–0x7E,
// so spaces too, with \" and \\ escapes). Both forms of one key are the
// same key. ok is false for anything else, including a value that starts
// with a double quote but is not a well-formed string.
func ParseKey(v string) (key string, ok bool) {
	lo := byte(0x21) // a bare key has no spaces: they would be trimmed or split
	if strings.HasPrefix(v, `"`) {
		if len(v) < 2 || !strings.HasSuffix(v, `"`) {
			return "", false
		}
		var b strings.Builder
		inner := v[1 : len(v)-1]
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			switch c {
			case '\\':
				i++
				if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
					return "", false
				}
				c = inner[i]
			case '"':
				return "", false // an unescaped quote inside
			}
			b.WriteByte(c)
		}
		v, lo = b.String(), 0x20
	}
	if len(v) == 0 || len(v) > MaxKeyLen {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < lo || v[i] > 0x7e {
			return "", false
		}
	}
	return v, true
}

// QuoteKey returns key in the quoted (structured-field string) form.
func QuoteKey(key string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(key) + `"`
}
