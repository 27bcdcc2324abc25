// Package hold is the wire format of a message's "not before" time: the
// attribute the producer (and the outbox relay) writes on a message that
// must not run before a time further off than SQS's 15-minute
// DelaySeconds, and that the consumer and the Lambda adapter read, and
// rewrite on the copies they re-send, before any handler runs. The
// decision of how a message received early is held is in internal/settle
// (Hold); see "Delays beyond 15 minutes" in the README.
//
// The attribute is a String named sqsonce-not-before. On the message the
// producer sends, its value is the time, RFC 3339 in UTC with
// milliseconds:
//
//	2026-03-01T09:30:00.000Z
//
// A copy that a consumer re-sent (SQS delays a message 15 minutes at
// most, and a copy's visibility is held at most once: see settle.Hold)
// carries the hop count and the first copy's MessageId and SentTimestamp
// (milliseconds since the epoch) after it, so that the handler sees the
// message as first sent:
//
//	2026-03-01T09:30:00.000Z;hop=3;id=5fea7756-0ea4-451a-a703-a558b933e274;sent=1772330400000
//
// Readers also take the time as milliseconds since the epoch, and ignore
// fields they do not know.
package hold

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Attr is the message attribute that carries a message's not-before time.
const Attr = "sqsonce-not-before"

// MaxIDLength is the longest first MessageId a mark carries.
const MaxIDLength = 128

// MaxLen is the longest value a sender of a mark must leave room for: the
// value of a re-sent copy with the longest hop count and MessageId. The
// producer counts a not-before message's attribute at this length, so
// that every copy a consumer re-sends fits in the queue.
const MaxLen = len("2006-01-02T15:04:05.000Z") + len(";hop=") + 10 + len(";id=") + MaxIDLength + len(";sent=") + 13

// timeLayout is RFC 3339 in UTC with milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Mark is what the attribute says.
type Mark struct {
	// NotBefore is when the message may run.
	NotBefore time.Time
	// Hop counts the re-sends: 0 on the message the producer sent.
	Hop int
	// MessageID and SentAt are the first copy's SQS MessageId and
	// SentTimestamp; empty and zero on the first copy itself.
	MessageID string
	SentAt    time.Time
}

// Value is the attribute's value for m.
func (m Mark) Value() string {
	var b strings.Builder
	b.WriteString(m.NotBefore.UTC().Truncate(time.Millisecond).Format(timeLayout))
	if m.Hop > 0 {
		fmt.Fprintf(&b, ";hop=%d", m.Hop)
	}
	if m.MessageID != "" {
		b.WriteString(";id=")
		b.WriteString(m.MessageID)
	}
	if !m.SentAt.IsZero() {
		fmt.Fprintf(&b, ";sent=%d", m.SentAt.UnixMilli())
	}
	return b.String()
}

// ErrMalformed is wrapped by Parse's error.
var ErrMalformed = errors.New("hold: malformed " + Attr)

// Parse reads an attribute value. The time must be RFC 3339 or
// milliseconds since the epoch; a hop is a count, an id 1 to MaxIDLength
// letters, digits, '-' or '_', a sent time milliseconds since the epoch.
func Parse(v string) (Mark, error) {
	fields := strings.Split(v, ";")
	var m Mark
	var err error
	if m.NotBefore, err = parseTime(strings.TrimSpace(fields[0])); err != nil {
		return Mark{}, err
	}
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			return Mark{}, fmt.Errorf("%w: field %q is not key=value", ErrMalformed, trim(f))
		}
		switch key {
		case "hop":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return Mark{}, fmt.Errorf("%w: hop %q is not a count", ErrMalformed, trim(val))
			}
			m.Hop = n
		case "id":
			if !validID(val) {
				return Mark{}, fmt.Errorf("%w: id %q is not a MessageId", ErrMalformed, trim(val))
			}
			m.MessageID = val
		case "sent":
			ms, err := strconv.ParseInt(val, 10, 64)
			if err != nil || ms <= 0 {
				return Mark{}, fmt.Errorf("%w: sent %q is not milliseconds since the epoch", ErrMalformed, trim(val))
			}
			m.SentAt = time.UnixMilli(ms)
		}
	}
	return m, nil
}

// parseTime reads RFC 3339 or milliseconds since the epoch.
func parseTime(s string) (time.Time, error) {
	if s != "" && strings.Trim(s, "0123456789") == "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			return time.UnixMilli(ms), nil
		}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q is neither RFC 3339 nor milliseconds since the epoch", ErrMalformed, trim(s))
	}
	return t, nil
}

func validID(s string) bool {
	if s == "" || len(s) > MaxIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// trim shortens hostile text quoted in an error.
func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Reserved reports whether name is the attribute this package writes: a
// producer's own attributes may not use it.
func Reserved(name string) bool { return name == Attr }
