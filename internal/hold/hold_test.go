package hold_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/hold"
)

func TestRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 30, 0, 123456789, time.FixedZone("x", 3600))
	for _, m := range []hold.Mark{
		{NotBefore: at},
		{NotBefore: at, Hop: 3, MessageID: "5fea7756-0ea4-451a-a703-a558b933e274", SentAt: time.UnixMilli(1772330400000)},
	} {
		v := m.Value()
		got, err := hold.Parse(v)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if !got.NotBefore.Equal(at.Truncate(time.Millisecond)) || got.Hop != m.Hop || got.MessageID != m.MessageID || !got.SentAt.Equal(m.SentAt) {
			t.Errorf("%q read as %+v, want %+v", v, got, m)
		}
		if len(v) > hold.MaxLen {
			t.Errorf("%q is longer than MaxLen %d", v, hold.MaxLen)
		}
	}
	if v := (hold.Mark{NotBefore: at}).Value(); v != "2026-03-01T08:30:00.123Z" {
		t.Errorf("first copy's value %q", v)
	}
	longest := hold.Mark{NotBefore: at, Hop: 1<<31 - 1, MessageID: strings.Repeat("a", hold.MaxIDLength), SentAt: time.UnixMilli(9999999999999)}
	if v := longest.Value(); len(v) != hold.MaxLen {
		t.Errorf("the longest value is %d bytes, MaxLen %d", len(v), hold.MaxLen)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"2026-03-01T09:30:00Z", true},
		{"2026-03-01T09:30:00.5+02:00", true},
		{"1772330400000", true},
		{"2026-03-01T09:30:00Z;hop=2;id=abc-1;sent=1772330400000;future=x", true},
		{"", false},
		{"tomorrow", false},
		{"2026-03-01T09:30:00Z;hop=-1", false},
		{"2026-03-01T09:30:00Z;hop", false},
		{"2026-03-01T09:30:00Z;id=a b", false},
		{"2026-03-01T09:30:00Z;id=" + strings.Repeat("a", 129), false},
		{"2026-03-01T09:30:00Z;sent=0", false},
	} {
		_, err := hold.Parse(c.in)
		if (err == nil) != c.ok {
			t.Errorf("Parse(%q): %v, want ok=%v", c.in, err, c.ok)
		}
		if err != nil && !errors.Is(err, hold.ErrMalformed) {
			t.Errorf("Parse(%q): %v does not wrap ErrMalformed", c.in, err)
		}
	}
}

// FuzzParse: any attribute value parses or fails with ErrMalformed,
// never panics, and what parses writes back to a value that reads the
// same.
func FuzzParse(f *testing.F) {
	f.Add("2026-03-01T09:30:00.000Z")
	f.Add("2026-03-01T09:30:00.000Z;hop=3;id=5fea7756;sent=1772330400000")
	f.Add("1772330400000;hop=1")
	f.Fuzz(func(t *testing.T, v string) {
		m, err := hold.Parse(v)
		if err != nil {
			if !errors.Is(err, hold.ErrMalformed) {
				t.Fatalf("%q: %v", v, err)
			}
			return
		}
		if m.NotBefore.Year() < 0 || m.NotBefore.Year() > 9999 {
			return // RFC 3339 cannot write it back
		}
		back, err := hold.Parse(m.Value())
		if err != nil {
			t.Fatalf("%q read as %+v, written as %q, which does not read: %v", v, m, m.Value(), err)
		}
		if !back.NotBefore.Equal(m.NotBefore.Truncate(time.Millisecond)) || back.Hop != m.Hop || back.MessageID != m.MessageID {
			t.Fatalf("%q → %+v → %q → %+v", v, m, m.Value(), back)
		}
	})
}
