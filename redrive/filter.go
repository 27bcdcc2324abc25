package redrive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqsonce/sqsonce/envelope"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// ErrBadFilter is wrapped by every [ParseFilter] error.
var ErrBadFilter = errors.New("redrive: bad filter")

// FilterKind is what a [Filter] looks at.
type FilterKind string

// Filter kinds.
const (
	FilterClass FilterKind = "class" // failure class: class=permanent,max_attempts ("none": no sqsonce-failure)
	FilterError FilterKind = "error" // failure error text: error~timeout, error=exact text
	FilterAttr  FilterKind = "attr"  // message attribute: attr:tenant=acme, attr:tenant~^ac, attr:tenant (present)
	FilterBody  FilterKind = "body"  // body: body~"status":"failed", body=exact
	FilterJSON  FilterKind = "json"  // field of a JSON body or of the message in its SNS/EventBridge envelope: json:order.status=failed
	FilterAge   FilterKind = "age"   // age: age>1h (older than), age<30m (newer than); units ns..h and d
	// FilterID selects messages by their MessageId in the DLQ:
	// id=ID1,ID2 (any of the list), id~RE.
	FilterID FilterKind = "id"
	// FilterGroup selects by FIFO MessageGroupId: group=G, group~RE.
	FilterGroup FilterKind = "group"
	// FilterSource selects by the source queue a message records (see
	// [Entry.Source]): source=NAME (its queue name, URL or ARN), source~RE
	// (on the recorded URL or ARN). It only selects: where a move sends
	// the message is decided by the move's own rules (see
	// [MoveOptions.To]).
	FilterSource FilterKind = "source"
)

// Filter selects messages. Several filters combine with AND. Build one
// with [ParseFilter]; the zero Filter matches nothing.
//
// Syntax: KIND OP VALUE, with OP "=" (equal), "~" (RE2 regular expression,
// unanchored), ">" / "<" (age only); attr and json take a name after a
// colon: attr:NAME=VALUE, json:PATH~RE, and attr:NAME alone tests presence.
// A JSON path is dot-separated object keys and array indexes; a field's
// value compares as its text (strings unquoted, other values as JSON).
// When the body is an SNS notification or an EventBridge event (as
// [envelope.Parse] reads them: the dead letters of a queue fed by SNS
// without raw delivery, or by an EventBridge rule), a json filter looks
// at the body and at the message inside the envelope (the SNS Message's
// JSON, the EventBridge detail), and matches when either has the field
// with the value: json:order_id=42 finds the publisher's order,
// json:TopicArn~orders still reads the envelope.
//
// id=, group= and source= select by message id (a comma-separated
// list), FIFO group and recorded source queue.
// A filter that can never match is an error: a class name with characters
// no class has or within two edits of a class sqsonce writes ("permanant";
// other names are taken as the application's own classes), and age<0.
type Filter struct {
	// Kind is what the filter looks at.
	Kind FilterKind
	// Name is the attribute name or JSON path (attr and json only).
	Name string
	// Op is "=", "~", ">", "<", or "" (attr presence).
	Op string
	// Value is the text after Op.
	Value string

	re      *regexp.Regexp
	classes []string
	ids     map[string]bool
	age     time.Duration
	path    []string
}

// ParseFilter parses one filter expression (see [Filter] for the syntax).
// Errors wrap [ErrBadFilter].
func ParseFilter(expr string) (Filter, error) {
	f, err := parseFilter(expr)
	if err != nil {
		return Filter{}, fmt.Errorf("%w %q: %s", ErrBadFilter, expr, err)
	}
	return f, nil
}

// ParseFilters parses several expressions.
func ParseFilters(exprs ...string) ([]Filter, error) {
	out := make([]Filter, 0, len(exprs))
	for _, e := range exprs {
		f, err := ParseFilter(e)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFilter(expr string) (Filter, error) {
	var f Filter
	i := strings.IndexAny(expr, ":=~<>")
	if i < 0 {
		return f, errors.New(`want KIND OP VALUE, e.g. class=permanent, error~timeout, attr:tenant=acme, body~RE, json:order.status=failed, age>1h`)
	}
	f.Kind = FilterKind(expr[:i])
	rest := expr[i:]
	switch f.Kind {
	case FilterAttr, FilterJSON:
		if rest[0] != ':' {
			return f, fmt.Errorf("%s needs a name: %s:NAME=VALUE", f.Kind, f.Kind)
		}
		rest = rest[1:]
		j := strings.IndexAny(rest, "=~")
		if j < 0 {
			f.Name, rest = rest, ""
		} else {
			f.Name, rest = rest[:j], rest[j:]
		}
		if f.Name == "" {
			return f, fmt.Errorf("%s needs a name: %s:NAME=VALUE", f.Kind, f.Kind)
		}
		if rest == "" {
			if f.Kind == FilterJSON {
				return f, errors.New("json needs a value: json:PATH=VALUE or json:PATH~RE")
			}
			return f, nil // attribute presence
		}
		if f.Kind == FilterJSON {
			f.path = strings.Split(f.Name, ".")
			if slices.Contains(f.path, "") {
				return f, fmt.Errorf("json path %q has an empty segment", f.Name)
			}
		}
	case FilterClass, FilterError, FilterBody, FilterAge, FilterID, FilterGroup, FilterSource:
	default:
		return f, fmt.Errorf("unknown kind %q (want class, error, attr, body, json, age, id, group or source)", f.Kind)
	}
	f.Op, f.Value = rest[:1], rest[1:]
	switch {
	case f.Kind == FilterAge:
		if f.Op != ">" && f.Op != "<" {
			return f, errors.New("age takes > (older than) or < (newer than): age>1h")
		}
		d, err := parseAge(f.Value)
		if err != nil {
			return f, err
		}
		if f.Op == "<" && d == 0 {
			return f, errors.New("age<0 matches nothing (an age is never negative)")
		}
		f.age = d
		return f, nil
	case f.Op != "=" && f.Op != "~":
		return f, fmt.Errorf("%s takes = or ~", f.Kind)
	case f.Kind == FilterClass:
		if f.Op != "=" {
			return f, errors.New("class takes =: class=permanent,max_attempts")
		}
		for c := range strings.SplitSeq(f.Value, ",") {
			if c = strings.TrimSpace(c); c == "" {
				return f, errors.New("empty class name")
			}
			if err := checkClass(c); err != nil {
				return f, err
			}
			f.classes = append(f.classes, c)
		}
		return f, nil
	case f.Kind == FilterID && f.Op == "=":
		f.ids = map[string]bool{}
		for id := range strings.SplitSeq(f.Value, ",") {
			if id = strings.TrimSpace(id); id == "" {
				return f, errors.New("empty message id")
			}
			f.ids[id] = true
		}
		return f, nil
	case f.Kind == FilterSource && f.Op == "=" && f.Value == "":
		return f, errors.New("source= needs a queue name, URL or ARN")
	}
	if f.Op == "~" {
		re, err := regexp.Compile(f.Value)
		if err != nil {
			return f, fmt.Errorf("regular expression: %v", err)
		}
		f.re = re
	}
	return f, nil
}

// knownClasses are the classes sqsonce writes, and ClassNone.
var knownClasses = []string{sqsmsg.ClassPermanent, sqsmsg.ClassMaxAttempts, sqsmsg.ClassPanic, sqsmsg.ClassKeyReuse, sqsmsg.ClassPayload, sqsmsg.ClassOutcomeUnknown, ClassNone}

// checkClass rejects a class name that can never match: one with
// characters no class has, or one within two edits of a class sqsonce
// writes (a typo such as "permanant"). Other names are an application's
// own classes (an error's FailureClass) and are accepted.
func checkClass(c string) error {
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("%q is not a class name (letters, digits, '_', '-' and '.'; known: %s)", c, strings.Join(knownClasses, ", "))
		}
	}
	if slices.Contains(knownClasses, c) {
		return nil
	}
	for _, k := range knownClasses {
		if d := editDistance(strings.ToLower(c), k); d <= 2 && d < len(k)/2 {
			return fmt.Errorf("unknown class %q (did you mean %q?)", c, k)
		}
	}
	return nil
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parseAge parses a Go duration, or a whole number of days ("7d").
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		// Digits only: Atoi would also take a sign ("+0d", "-0d").
		days, err := strconv.Atoi(n)
		if err != nil || strings.TrimLeft(n, "0123456789") != "" || days > 100000 {
			return 0, fmt.Errorf("age %q: want a duration such as 90m, 2h or 7d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("age %q: want a duration such as 90m, 2h or 7d", s)
	}
	return d, nil
}

// String returns the filter as ParseFilter reads it.
func (f Filter) String() string {
	if f.Name != "" {
		return string(f.Kind) + ":" + f.Name + f.Op + f.Value
	}
	return string(f.Kind) + f.Op + f.Value
}

// Match reports whether the entry passes the filter.
func (f Filter) Match(e Entry) bool {
	switch f.Kind {
	case FilterClass:
		return slices.Contains(f.classes, e.Class())
	case FilterError:
		if e.Failure == nil {
			return false
		}
		return f.text(e.Failure.Error)
	case FilterBody:
		return f.text(e.Message.Body)
	case FilterAttr:
		v, ok := e.Message.Attributes[f.Name]
		if !ok {
			return false
		}
		if f.Op == "" {
			return true
		}
		s := ""
		if v.StringValue != nil {
			s = *v.StringValue
		} else if v.BinaryValue != nil {
			s = string(v.BinaryValue)
		}
		return f.text(s)
	case FilterJSON:
		if s, ok := jsonField(e.Message.Body, f.path); ok && f.text(s) {
			return true
		}
		_, inner, ok := unwrap(e.Message.Body)
		if !ok {
			return false
		}
		s, ok := jsonField(inner, f.path)
		return ok && f.text(s)
	case FilterAge:
		if f.Op == ">" {
			return e.Age > f.age
		}
		return e.Age < f.age
	case FilterID:
		if f.Op == "=" {
			return f.ids[e.Message.ID]
		}
		return f.text(e.Message.ID)
	case FilterGroup:
		return f.text(e.Message.GroupID)
	case FilterSource:
		src := e.Source()
		if src == "" {
			return false
		}
		if f.Op == "=" {
			return src == f.Value || queueName(src) == f.Value
		}
		return f.text(src)
	}
	return false
}

// queueName returns the queue name of a queue URL or ARN (its last path
// or ARN segment).
func queueName(s string) string {
	if _, ok := parseQueueARN(s); ok {
		return s[strings.LastIndex(s, ":")+1:]
	}
	if strings.Contains(s, "://") {
		return nameOf(s)
	}
	return s
}

// text matches s by equality or regular expression.
func (f Filter) text(s string) bool {
	if f.Op == "~" {
		return f.re != nil && f.re.MatchString(s)
	}
	return s == f.Value
}

// unwrap returns the kind of envelope a body is (envelope.SNS for an SNS
// Notification, envelope.EventBridge for an event) and the message inside
// it: the SNS Message or the EventBridge detail as JSON text. ok is false
// for a body that is no envelope, or one envelope.Parse cannot read, or an
// SNS subscription confirmation (its Message is SNS's text).
func unwrap(body string) (kind envelope.Kind, inner string, ok bool) {
	env, inner, _, err := envelope.Parse(body)
	if err != nil || env == nil || (env.Kind == envelope.SNS && env.Type != "Notification") {
		return "", "", false
	}
	return env.Kind, inner, true
}

// jsonField returns the text of the field at path in a JSON body.
func jsonField(body string, path []string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return "", false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return "", false
			}
			v = x[i]
		default:
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return "", false
	}
	return strings.TrimSuffix(buf.String(), "\n"), true
}

// matchAll reports whether e passes every filter.
func matchAll(filters []Filter, e Entry) bool {
	for _, f := range filters {
		if !f.Match(e) {
			return false
		}
	}
	return true
}
