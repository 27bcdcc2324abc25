package main

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseCredit(t *testing.T) {
	t.Parallel()
	good := []struct {
		body string
		want credit
	}{
		{`{"id":"c1","account":"a1","amount":12}`, credit{"c1", "a1", 12, time.Time{}}},
		{`{"id":"c1","account":"a1","amount":-5,"note":"x"}`, credit{"c1", "a1", -5, time.Time{}}},
		{` {"amount":0,"account":"a","id":"i"} `, credit{"i", "a", 0, time.Time{}}},
		{`{"id":"c","account":"a","amount":9223372036854775807}`, credit{"c", "a", 9223372036854775807, time.Time{}}},
		{`{"id":"c","account":"a","amount":1,"not_before":"2026-03-01T09:30:00.250Z"}`, credit{"c", "a", 1, time.Date(2026, 3, 1, 9, 30, 0, 250e6, time.UTC)}},
	}
	for _, tc := range good {
		got, err := parseCredit(tc.body)
		if err != nil || got.ID != tc.want.ID || got.Account != tc.want.Account || got.Amount != tc.want.Amount || !got.NotBefore.Equal(tc.want.NotBefore) {
			t.Errorf("parseCredit(%s) = %+v, %v; want %+v", tc.body, got, err, tc.want)
		}
	}
	bad := []string{
		``, `null`, `[]`, `"x"`, `12`, `{`, `{"id":"c","account":"a","amount":1} {}`,
		`{"account":"a","amount":1}`, `{"id":"","account":"a","amount":1}`, `{"id":1,"account":"a","amount":1}`,
		`{"id":"c","amount":1}`, `{"id":"c","account":null,"amount":1}`,
		`{"id":"c","account":"a"}`, `{"id":"c","account":"a","amount":12.5}`, `{"id":"c","account":"a","amount":"12"}`,
		`{"id":"c","account":"a","amount":1e3}`, `{"id":"c","account":"a","amount":9223372036854775808}`,
		`{"id":"c","account":"a","amount":null}`, `{"id":"c","account":"a","amount":true}`, `{"id":"c","account":"a","amount":-0.0}`,
		`{"id":"c","account":"a","amount":1,"not_before":"tomorrow"}`, `{"id":"c","account":"a","amount":1,"not_before":1}`,
	}
	for _, body := range bad {
		if c, err := parseCredit(body); !errors.Is(err, errMalformed) {
			t.Errorf("parseCredit(%q) = %+v, %v; want a malformed-credit error", body, c, err)
		}
	}
}

func TestCreditKey(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"id":"c1","account":"a","amount":1}`: "c1",
		`{"id":"c1","amount":"bad"}`:           "c1",
		`{"id":7}`:                             "",
		`not json`:                             "",
		`{}`:                                   "",
		`{"ID":"c1"}`:                          "",
	} {
		if got := creditKey(body); got != want {
			t.Errorf("creditKey(%q) = %q, want %q", body, got, want)
		}
	}
}

// FuzzParseCredit: any body either parses into a complete credit that
// round-trips, or is reported malformed; nothing panics.
func FuzzParseCredit(f *testing.F) {
	for _, s := range []string{`{"id":"c1","account":"a1","amount":12}`, `{"amount":1e3}`, `[]`, "\xff", `{"id":"x","account":"y","amount":-0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c, err := parseCredit(body)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v does not wrap errMalformed", err)
			}
			if utf8.ValidString(body) && strings.Contains(err.Error(), body) && len(body) > 60 {
				t.Fatalf("error repeats the whole body")
			}
			return
		}
		if c.ID == "" || c.Account == "" {
			t.Fatalf("parsed %+v with an empty field", c)
		}
		if creditKey(body) != c.ID {
			t.Fatalf("creditKey disagrees with parseCredit on %q", body)
		}
	})
}
