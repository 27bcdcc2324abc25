package idempotency_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/idempotency"
)

// TestFingerprintDefaultComparesBytes: by default the body is compared
// byte for byte, so the same JSON with its keys in another order is
// another request.
func TestFingerprintDefaultComparesBytes(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{}).Wrap(c)
	post(h, http.MethodPost, "/credits", "k", "alice", `{"amount":5,"currency":"EUR"}`)
	w := post(h, http.MethodPost, "/credits", "k", "alice", `{"currency":"EUR","amount":5}`)
	if typ := problemType(t, w, http.StatusUnprocessableEntity); typ != idempotency.TypeKeyReused {
		t.Fatalf("type %s", typ)
	}
}

// TestFingerprintCanonicalJSON: with CanonicalJSONFingerprint the same
// JSON value with its keys in another order and other whitespace replays;
// another value, another path or another method is still another request;
// a body that is not JSON is compared byte for byte.
func TestFingerprintCanonicalJSON(t *testing.T) {
	t.Parallel()
	c := &credits{}
	m := newMiddleware(t, idempotency.Config{FingerprintFunc: idempotency.CanonicalJSONFingerprint})
	h := m.Wrap(c)
	first := post(h, http.MethodPost, "/credits", "k", "alice", `{"amount":5,"currency":"EUR","tags":["a","b"],"meta":{"x":1,"y":null}}`)
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	for _, body := range []string{
		`{"currency":"EUR","amount":5,"meta":{"y":null,"x":1},"tags":["a","b"]}`,
		"{\n  \"tags\": [ \"a\", \"b\" ],\n  \"meta\": {\"x\": 1, \"y\": null},\n  \"currency\": \"\\u0045UR\",\n  \"amount\": 5\n}\n",
	} {
		w := post(h, http.MethodPost, "/credits", "k", "alice", body)
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" || w.Body.String() != first.Body.String() {
			t.Fatalf("same JSON value %s: %d %q, want the replay of the first response", body, w.Code, w.Body)
		}
	}
	for _, tc := range []struct{ method, target, body string }{
		{http.MethodPost, "/credits", `{"amount":5.0,"currency":"EUR","tags":["a","b"],"meta":{"x":1,"y":null}}`}, // a number written otherwise
		{http.MethodPost, "/credits", `{"amount":5,"currency":"EUR","tags":["b","a"],"meta":{"x":1,"y":null}}`},   // array order matters
		{http.MethodPost, "/credits", `{"amount":5,"currency":"EUR","tags":["a","b"],"meta":{"x":1}}`},            // a key left out
		{http.MethodPost, "/debits", `{"amount":5,"currency":"EUR","tags":["a","b"],"meta":{"x":1,"y":null}}`},
		{http.MethodPatch, "/credits", `{"amount":5,"currency":"EUR","tags":["a","b"],"meta":{"x":1,"y":null}}`},
		{http.MethodPost, "/credits?dry=1", `{"amount":5,"currency":"EUR","tags":["a","b"],"meta":{"x":1,"y":null}}`},
	} {
		w := post(h, tc.method, tc.target, "k", "alice", tc.body)
		if typ := problemType(t, w, http.StatusUnprocessableEntity); typ != idempotency.TypeKeyReused {
			t.Fatalf("%s %s %s: type %s", tc.method, tc.target, tc.body, typ)
		}
	}
	// Not JSON: byte for byte.
	post(h, http.MethodPost, "/credits", "form", "alice", "amount=5&currency=EUR")
	if w := post(h, http.MethodPost, "/credits", "form", "alice", "amount=5&currency=EUR"); w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("the same form body: %d, want a replay", w.Code)
	}
	if w := post(h, http.MethodPost, "/credits", "form", "alice", "currency=EUR&amount=5"); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another form body: %d, want 422", w.Code)
	}
	if got := c.runs.Load(); got != 2 {
		t.Fatalf("runs = %d, want 2", got)
	}
}

// TestFingerprintFuncError: a FingerprintFunc error answers 400 before any
// claim; the key stays free for a corrected request.
func TestFingerprintFuncError(t *testing.T) {
	t.Parallel()
	c := &credits{}
	strict := func(r *http.Request, body []byte) (string, error) {
		if !json.Valid(body) {
			return "", errors.New("the body must be JSON")
		}
		return idempotency.CanonicalJSONFingerprint(r, body)
	}
	m := newMiddleware(t, idempotency.Config{FingerprintFunc: strict})
	h := m.Wrap(c)
	w := post(h, http.MethodPost, "/credits", "k", "alice", "{not json")
	if typ := problemType(t, w, http.StatusBadRequest); typ != idempotency.TypeBodyInvalid {
		t.Fatalf("type %s", typ)
	}
	if !strings.Contains(w.Body.String(), "the body must be JSON") {
		t.Fatalf("problem %s does not carry the function's reason", w.Body)
	}
	if w := post(h, http.MethodPost, "/credits", "k", "alice", `{"amount":5}`); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("the corrected request: %d %s, want a fresh 201", w.Code, w.Body)
	}
	if c.runs.Load() != 1 || m.Count(idempotency.OutcomeRejected) != 1 {
		t.Fatalf("runs %d, rejected %d", c.runs.Load(), m.Count(idempotency.OutcomeRejected))
	}
}

// fp is the canonical fingerprint of body.
func fp(t *testing.T, body []byte) string {
	t.Helper()
	s, err := idempotency.CanonicalJSONFingerprint(nil, body)
	if err != nil {
		t.Fatalf("CanonicalJSONFingerprint(%q): %v", body, err)
	}
	return s
}

func TestCanonicalJSONFingerprint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`, true},
		{` [1, {"z":true,"y":false}] `, `[1,{"y":false,"z":true}]`, true},
		{`"\u00e9"`, `"é"`, true},
		{`1`, `1.0`, false},
		{`1e2`, `100`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":"1"}`, false},
		{`{"a":1,"a":2}`, `{"a":2}`, false}, // duplicate keys: raw bytes
		{`{"a":1,"a":2}`, `{"a":2,"a":1}`, false},
		{`"\ud800"`, `"\ufffd"`, false}, // a lone surrogate is not U+FFFD
		{"\"\xff\"", "\"\xfe\"", false}, // invalid UTF-8 is not U+FFFD
		{`{"a":1} {"a":1}`, `{"a":1}{"a":1}`, false},
		{``, ` `, false},
		{`{"a":`, `{"a": `, false},
	} {
		if got := fp(t, []byte(tc.a)) == fp(t, []byte(tc.b)); got != tc.same {
			t.Errorf("%q and %q: same fingerprint %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
	// Deep nesting is fingerprinted as bytes, without exhausting the stack.
	deep := []byte(strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20))
	if got := fp(t, deep); got != string(deep) {
		t.Errorf("a body nested %d deep: not compared as its bytes", 1<<20)
	}
}

// FuzzCanonicalJSONFingerprint: never panics; a body that is not JSON is
// its own bytes; a JSON body's fingerprint is JSON of the same value, and
// a fixed point; two renderings of one value give one fingerprint.
func FuzzCanonicalJSONFingerprint(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,{"d":"x","c":1.50}]}`, `[]`, `{}`, `"\u0000\ud83d\ude00<>&"`, `-0.0e+1`,
		`{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `[[[[]]]]`, `{"":{"":""}}`, ` 7 `, `{"a":1}x`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := fp(t, body)
		if !json.Valid(body) {
			if got != string(body) {
				t.Fatalf("invalid JSON %q fingerprinted as %q, want its bytes", body, got)
			}
			return
		}
		if !json.Valid([]byte(got)) {
			t.Fatalf("%q fingerprinted as %q: not JSON", body, got)
		}
		if again := fp(t, []byte(got)); again != got {
			t.Fatalf("not a fixed point: %q → %q → %q", body, got, again)
		}
		v := decode(t, body)
		if w := decode(t, []byte(got)); !jsonEqual(v, w) {
			t.Fatalf("%q fingerprinted as %q: another value", body, got)
		}
		// Two renderings of the value body holds (as encoding/json reads
		// it): sorted and compact, reversed and indented.
		a, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		render(&b, v, "")
		if fa, fb := fp(t, a), fp(t, b.Bytes()); fa != fb {
			t.Fatalf("one value, two fingerprints:\n%s → %q\n%s → %q", a, fa, b.Bytes(), fb)
		}
	})
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// jsonEqual compares decoded values, numbers by their text.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !jsonEqual(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, jsonEqual)
	}
	return a == b
}

// render writes v with its object keys in reverse order, indented.
func render(w *bytes.Buffer, v any, indent string) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		w.WriteString("{\n")
		for i, k := range keys {
			if i > 0 {
				w.WriteString(",\n")
			}
			kb, _ := json.Marshal(k)
			w.WriteString(indent + "  ")
			w.Write(kb)
			w.WriteString(" : ")
			render(w, v[k], indent+"  ")
		}
		w.WriteString("\n" + indent + "}")
	case []any:
		w.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				w.WriteString(" ,\t")
			}
			render(w, e, indent)
		}
		w.WriteString(" ]")
	default:
		b, _ := json.Marshal(v)
		w.Write(b)
	}
}
