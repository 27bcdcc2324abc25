package idempotency

import "strings"

// MaxKeyLen is the longest key accepted, in characters.
const MaxKeyLen = 255

// ParseKey parses an Idempotency-Key header value: 1 to 255 visible ASCII
// characters (0x21–0x7E), bare (abc) or in the draft's structured-field
// string form ("abc", with \" and \\ escapes); both forms of one key are
// the same key. ok is false for anything else, including a value that
// starts with a double quote but is not a well-formed quoted string.
func ParseKey(v string) (key string, ok bool) {
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
		v = b.String()
	}
	if len(v) == 0 || len(v) > MaxKeyLen {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
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
