package idempotency

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// CanonicalJSONFingerprint is a Config.FingerprintFunc for JSON APIs: a
// body holding one JSON value stands for that value written canonically,
// so the same value with its object keys in another order, other
// whitespace or other string escapes ("\u00e9" for "é") is the same
// request. Object keys are sorted (by their UTF-8 bytes) at every level;
// array order is kept; numbers are kept as written (1, 1.0 and 1e0 differ:
// a handler may read them differently); strings are compared by their
// value.
//
// A body that is not exactly one JSON value (empty, a form, malformed,
// trailing data), one with a repeated object key (parsers disagree on
// which one counts), or one nested more than 10000 deep (encoding/json's
// own limit) is compared byte for byte, as without a FingerprintFunc; so
// is a string that decodes to U+FFFD (invalid UTF-8 or a lone surrogate
// escape, which decoding would otherwise merge), written as it came. A
// body already in canonical form, and any body that is not JSON, has the
// same fingerprint as without a FingerprintFunc. It never returns an
// error; wrap it to refuse bodies that are not JSON.
func CanonicalJSONFingerprint(_ *http.Request, body []byte) (string, error) {
	if c, ok := canonicalJSON(body); ok {
		return string(c), nil
	}
	return string(body), nil
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// jsonNode is a parsed JSON value: a scalar's canonical text, or an
// array's elements, or an object's members sorted by key.
type jsonNode struct {
	kind  byte // 0 (scalar), '[' or '{'
	text  string
	keys  []string // an object's keys' canonical text, sorted by their value
	elems []*jsonNode
}

// canonicalJSON returns body's value written canonically, or false when
// body is not to be canonicalised (see CanonicalJSONFingerprint).
func canonicalJSON(body []byte) ([]byte, bool) {
	// Valid checks the syntax, a single value and the depth in one pass:
	// the parse below then only meets well-formed input.
	if !json.Valid(body) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	p := jsonParser{dec: dec, body: body}
	p.enc = json.NewEncoder(&p.buf)
	p.enc.SetEscapeHTML(false)
	n, ok := p.value(0)
	if !ok {
		return nil, false
	}
	var out bytes.Buffer
	out.Grow(len(body))
	n.write(&out)
	return out.Bytes(), true
}

type jsonParser struct {
	dec  *json.Decoder
	body []byte
	enc  *json.Encoder // writes strings to buf, <, > and & unescaped
	buf  bytes.Buffer
}

func (p *jsonParser) value(depth int) (*jsonNode, bool) {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, false
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxJSONDepth {
			return nil, false
		}
		switch t {
		case '[':
			return p.array(depth)
		case '{':
			return p.object(depth)
		}
		return nil, false
	case string:
		return &jsonNode{text: p.str(t, start)}, true
	case json.Number:
		return &jsonNode{text: string(t)}, true
	case bool:
		if t {
			return &jsonNode{text: "true"}, true
		}
		return &jsonNode{text: "false"}, true
	case nil:
		return &jsonNode{text: "null"}, true
	}
	return nil, false
}

func (p *jsonParser) array(depth int) (*jsonNode, bool) {
	n := &jsonNode{kind: '['}
	for p.dec.More() {
		e, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		n.elems = append(n.elems, e)
	}
	if _, err := p.dec.Token(); err != nil { // ]
		return nil, false
	}
	return n, true
}

func (p *jsonParser) object(depth int) (*jsonNode, bool) {
	type member struct {
		key, text string
		value     *jsonNode
	}
	var ms []member
	for p.dec.More() {
		start := p.dec.InputOffset()
		tok, err := p.dec.Token()
		k, isKey := tok.(string)
		if err != nil || !isKey {
			return nil, false
		}
		text := p.str(k, start)
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		ms = append(ms, member{key: k, text: text, value: v})
	}
	if _, err := p.dec.Token(); err != nil { // }
		return nil, false
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	n := &jsonNode{kind: '{'}
	for i, m := range ms {
		if i > 0 && ms[i-1].key == m.key {
			return nil, false // a repeated key
		}
		n.keys = append(n.keys, m.text)
		n.elems = append(n.elems, m.value)
	}
	return n, true
}

// str is the canonical text of the string s, decoded from the token that
// ends at the decoder's offset and began at or after start: s re-encoded,
// or, when s holds U+FFFD (which invalid UTF-8 and lone surrogates decode
// to as well), the token as written.
func (p *jsonParser) str(s string, start int64) string {
	if strings.ContainsRune(s, utf8.RuneError) {
		raw := p.body[start:p.dec.InputOffset()]
		return string(raw[bytes.IndexByte(raw, '"'):])
	}
	p.buf.Reset()
	_ = p.enc.Encode(s) // a string always encodes
	return string(bytes.TrimSuffix(p.buf.Bytes(), []byte("\n")))
}

func (n *jsonNode) write(out *bytes.Buffer) {
	switch n.kind {
	case '[':
		out.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				out.WriteByte(',')
			}
			e.write(out)
		}
		out.WriteByte(']')
	case '{':
		out.WriteByte('{')
		for i, e := range n.elems {
			if i > 0 {
				out.WriteByte(',')
			}
			out.WriteString(n.keys[i])
			out.WriteByte(':')
			e.write(out)
		}
		out.WriteByte('}')
	default:
		out.WriteString(n.text)
	}
}
