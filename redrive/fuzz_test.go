package redrive_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/redrive"
)

// FuzzRecords feeds the export/import record reader arbitrary files: it
// never panics, and a file it accepts has exactly one record per non-blank
// line.
func FuzzRecords(f *testing.F) {
	f.Add([]byte("{\"body\":\"x\"}\n"), false)
	f.Add([]byte("{\"body\":\"x\",\"group_id\":\"g\"}\n\n  \n{\"body\":\"y\",\"group_id\":\"g\"}"), true)
	f.Add([]byte(`{"message_id":"m","body":"b","attributes":{"a":{"data_type":"Binary","binary_value":"AAE="}},"sent_at":"2024-01-01T00:00:00Z","failure":{"class":"permanent"}}`), false)
	f.Add([]byte("{\"body\":\"x\"} {\"body\":\"y\"}\n"), false)
	f.Add([]byte("{\"body\":\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, fifo bool) {
		n, err := redrive.CheckRecords(bytes.NewReader(data), fifo)
		if err != nil {
			if !errors.Is(err, redrive.ErrBadRecord) && !errors.Is(err, redrive.ErrKindMismatch) {
				t.Fatalf("error %v wraps neither ErrBadRecord nor ErrKindMismatch", err)
			}
			return
		}
		lines := 0
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if n != lines {
			t.Fatalf("%d records from %d non-blank lines", n, lines)
		}
	})
}

// FuzzParseHistory: the sqsonce-redrive attribute is outside input (a
// producer can set it). Parsing never panics, and what it accepts
// survives a round trip.
func FuzzParseHistory(f *testing.F) {
	f.Add(`{"count":2,"redriven_at":"2024-05-01T10:00:00Z","dlq":"orders-dlq","run":"ab12"}`)
	f.Add(`{"count":-1,"redriven_at":"9999-12-31T23:59:59Z","last_failure":{"class":"permanent","error":"x"}}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Add(`{"redriven_at":"not a time"}`)
	f.Fuzz(func(t *testing.T, s string) {
		h, err := redrive.ParseHistory(s)
		if err != nil {
			return
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode %+v: %v", s, h, err)
		}
		h2, err := redrive.ParseHistory(string(b))
		if err != nil || h2.Count != h.Count || h2.Run != h.Run || h2.DLQ != h.DLQ || !h2.RedrivenAt.Equal(h.RedrivenAt) {
			t.Fatalf("round trip of %q: %+v → %s → %+v, %v", s, h, b, h2, err)
		}
	})
}

// FuzzAgeFilter: an age filter either fails to parse or splits ages at
// one point: age>D matches exactly the ages over D, age<D those under.
func FuzzAgeFilter(f *testing.F) {
	for _, s := range []string{"90m", "2h", "7d", "0s", "1.5h", "-1h", "100001d", "9223372036854775807ns", "d", "1e3h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		older, err := redrive.ParseFilter("age>" + s)
		if err != nil {
			if !errors.Is(err, redrive.ErrBadFilter) {
				t.Fatalf("error %v does not wrap ErrBadFilter", err)
			}
			return
		}
		d, ok := parsedAge(s)
		if !ok || d < 0 {
			t.Fatalf("accepted age %q that is not a non-negative duration", s)
		}
		newer, err := redrive.ParseFilter("age<" + s)
		if d == 0 {
			if err == nil {
				t.Fatalf("age<%s parses, and can never match", s)
			}
			newer = redrive.Filter{} // the zero Filter matches nothing, as age<0 would
		} else if err != nil {
			t.Fatalf("age>%s parses, age<%s does not: %v", s, s, err)
		}
		at := func(age time.Duration) redrive.Entry {
			return redrive.Entry{Message: &consumer.Message{}, Age: age}
		}
		if older.Match(at(d)) || newer.Match(at(d)) {
			t.Fatalf("age exactly %s matches %s or %s", d, older, newer)
		}
		if d < 1<<62 && (!older.Match(at(d+1)) || newer.Match(at(d+1))) {
			t.Fatalf("age %s: %s should match, %s should not", d+1, older, newer)
		}
		if d > 0 && (older.Match(at(d-1)) || !newer.Match(at(d-1))) {
			t.Fatalf("age %s: %s should not match, %s should", d-1, older, newer)
		}
	})
}

// parsedAge reads an age as the filter documents it: a Go duration, or a
// whole number of days.
func parsedAge(s string) (time.Duration, bool) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int64
		for _, c := range n {
			if c < '0' || c > '9' {
				return 0, false
			}
			days = days*10 + int64(c-'0')
			if days > 100000 {
				return 0, false
			}
		}
		return time.Duration(days) * 24 * time.Hour, n != ""
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// FuzzParseQueueARN: what parses as a queue ARN is rebuilt from its parts
// exactly, and has every part.
func FuzzParseQueueARN(f *testing.F) {
	for _, s := range []string{"arn:aws:sqs:us-east-1:123456789012:orders", "arn:aws-cn:sqs:cn-north-1:1:q.fifo",
		"arn:aws:sqs:us-east-1:123456789012", "arn:aws:sns:us-east-1:1:t", "arn:aws:sqs:::q", "orders", "https://sqs/1/q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := redrive.ParseQueueARN(s)
		if !ok {
			return
		}
		if a.Partition == "" || a.Region == "" || a.Account == "" || a.Name == "" {
			t.Fatalf("%q parsed with an empty part: %+v", s, a)
		}
		if got := "arn:" + a.Partition + ":sqs:" + a.Region + ":" + a.Account + ":" + a.Name; got != s {
			t.Fatalf("%q parsed as %+v, which rebuilds as %q", s, a, got)
		}
	})
}
