package redrive

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/delivery"
)

func testEntry(body string, class, errText string, age time.Duration, attrs map[string]string) Entry {
	m := delivery.New(types.Message{MessageId: aws.String("m1"), Body: aws.String(body)}, "q", time.Now())
	for k, v := range attrs {
		m.Attributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	e := Entry{Message: m, Age: age}
	if class != "" {
		e.Failure = &deadletter.Failure{Class: class, Error: errText}
	}
	return e
}

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	e := testEntry(`{"order":{"id":42,"status":"failed","tags":["a","b"],"ok":false}}`, "permanent", "db timeout after 3s", 2*time.Hour,
		map[string]string{"tenant": "acme"})
	none := testEntry("plain text", "", "", time.Minute, nil)
	cases := []struct {
		expr string
		e    Entry
		want bool
	}{
		{"class=permanent", e, true},
		{"class=max_attempts,permanent", e, true},
		{"class=panic", e, false},
		{"class=none", none, true},
		{"class=permanent", none, false},
		{"error~timeout", e, true},
		{"error~^timeout", e, false},
		{"error=db timeout after 3s", e, true},
		{"error~.", none, false},
		{"attr:tenant=acme", e, true},
		{"attr:tenant=acm", e, false},
		{"attr:tenant~^ac", e, true},
		{"attr:tenant", e, true},
		{"attr:tenant", none, false},
		{"body~status\":\"failed", e, true},
		{"body=plain text", none, true},
		{"body~^x", none, false},
		{"json:order.status=failed", e, true},
		{"json:order.id=42", e, true},
		{"json:order.tags.1=b", e, true},
		{"json:order.tags.2=b", e, false},
		{"json:order.ok=false", e, true},
		{"json:order.tags=[\"a\",\"b\"]", e, true},
		{"json:order.status~^fail", e, true},
		{"json:order.missing=x", e, false},
		{"json:order.status=failed", none, false},
		{"age>1h", e, true},
		{"age>3h", e, false},
		{"age<1h", none, true},
		{"age<1d", e, true},
		{"age>1d", e, false},
	}
	for _, c := range cases {
		f, err := ParseFilter(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := f.Match(c.e); got != c.want {
			t.Errorf("%s on %q: got %v, want %v", c.expr, c.e.Message.Body, got, c.want)
		}
		if f.String() != c.expr {
			t.Errorf("%s: String() = %q", c.expr, f.String())
		}
	}
}

// TestFilterIDGroupSource checks the filters the console selects with: a
// list of message ids, a FIFO group, and the source queue a message
// records (SQS's DeadLetterQueueSourceArn first, else the failure record's
// source_queue), by name, URL, ARN or regular expression.
func TestFilterIDGroupSource(t *testing.T) {
	t.Parallel()
	recorded := testEntry("x", "permanent", "boom", time.Minute, nil)
	recorded.Failure.SourceQueue = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
	moved := testEntry("y", "", "", time.Minute, nil)
	moved.Message.ID = "m2"
	moved.Message.GroupID = "customer-7"
	moved.Message.SystemAttributes = map[string]string{
		string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn): "arn:aws:sqs:us-east-1:123456789012:payments.fifo",
	}
	cases := []struct {
		expr string
		e    Entry
		want bool
	}{
		{"id=m1", recorded, true},
		{"id=m0,m1,m9", recorded, true},
		{"id=m0,m9", recorded, false},
		{"id=m1", moved, false},
		{"id~^m[0-9]$", moved, true},
		{"group=customer-7", moved, true},
		{"group=customer-8", moved, false},
		{"group~^customer-", recorded, false},
		{"source=orders", recorded, true},
		{"source=https://sqs.us-east-1.amazonaws.com/123456789012/orders", recorded, true},
		{"source=order", recorded, false},
		{"source=payments.fifo", moved, true},
		{"source=arn:aws:sqs:us-east-1:123456789012:payments.fifo", moved, true},
		{"source=orders", moved, false},
		{"source~payments", moved, true},
		{"source~.", testEntry("z", "", "", 0, nil), false},
	}
	for _, c := range cases {
		f, err := ParseFilter(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := f.Match(c.e); got != c.want {
			t.Errorf("%s on %s: got %v, want %v", c.expr, c.e.Message.ID, got, c.want)
		}
		if f.String() != c.expr {
			t.Errorf("%s: String() = %q", c.expr, f.String())
		}
	}
	if got := moved.Source(); got != "arn:aws:sqs:us-east-1:123456789012:payments.fifo" {
		t.Errorf("Source() = %q: SQS's DeadLetterQueueSourceArn comes first", got)
	}
}

func TestParseFilterErrors(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"", "class", "klass=x", "class~x", "class=", "class=a,,b", "error>x", "error~(", "attr=x", "attr:=x",
		"json:a", "json:a..b=x", "json:=x", "body~[", "age=1h", "age>soon", "age>-1h", "age<xd", ":x", "age:x",
		// Filters that can never match are errors too: a misspelt class,
		// a malformed one, an age under zero.
		"class=permanant", "class==x", "class=permanent,max_atempts", "class=key reuse", "age<0s", "age<0d",
		"id=", "id=a,,b", "id>a", "source=", "source<x", "group~("} {
		if _, err := ParseFilter(expr); !errors.Is(err, ErrBadFilter) {
			t.Errorf("%q: got %v, want ErrBadFilter", expr, err)
		}
	}
	// A class of the application's own (an error's FailureClass) is a
	// class name like any other.
	for _, expr := range []string{"class=permanent", "class=none", "class=quota_exceeded", "class=billing.declined", "class=max_attempts,key_reuse"} {
		if _, err := ParseFilter(expr); err != nil {
			t.Errorf("%q: %v", expr, err)
		}
	}
	_, err := ParseFilter("class=permanant")
	if err == nil || !strings.Contains(err.Error(), `unknown class "permanant" (did you mean "permanent"?)`) {
		t.Errorf("misspelt class: %v", err)
	}
}

// FuzzParseFilter checks that the parser never panics, that what it
// accepts prints back to an expression it parses the same way, and that
// matching never panics.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"class=permanent", "error~time(out)?", "attr:tenant=acme", "attr:x", "body~^{", "json:a.0.b=1", "age>7d", "age<90m", "json:a~", "attr:a~b=c", "id=m1,m2", "id~^m", "group=g-1", "source=orders", "source~arn:"} {
		f.Add(s, `{"a":[{"b":1}]}`)
	}
	f.Add("json:a.0.b=1", `{"Type":"Notification","MessageId":"m","TopicArn":"t","Message":"{\"a\":[{\"b\":1}]}"}`)
	f.Add("json:a~x", `{"id":"e","source":"s","detail-type":"d","detail":{"a":"x"}}`)
	f.Fuzz(func(t *testing.T, expr, body string) {
		flt, err := ParseFilter(expr)
		if err != nil {
			if !errors.Is(err, ErrBadFilter) {
				t.Fatalf("%q: error %v does not wrap ErrBadFilter", expr, err)
			}
			return
		}
		again, err := ParseFilter(flt.String())
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", expr, flt.String(), err)
		}
		if again.String() != flt.String() || again.Kind != flt.Kind || again.Name != flt.Name || again.Op != flt.Op || again.Value != flt.Value {
			t.Fatalf("%q: round trip %+v != %+v", expr, again, flt)
		}
		e := testEntry(body, "permanent", body, time.Hour, map[string]string{"a": body})
		if flt.Match(e) != again.Match(e) {
			t.Fatalf("%q: round trip matches differently", expr)
		}
	})
}
