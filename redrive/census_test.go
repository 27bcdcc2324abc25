package redrive

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A Census counts every message's class but reads only the first
// CensusSample bodies, and keeps at most 50 field names however many a
// body holds.
func TestCensus(t *testing.T) {
	t.Parallel()
	var c Census
	c.Add(testEntry(snsBody(`{"order_id":"o-1"}`), "permanent", "x", time.Hour, nil))
	c.Add(testEntry(`{"id":"e","source":"s","detail-type":"d","detail":{"sku":"A"}}`, "", "", time.Hour, nil))
	c.Add(testEntry("plain text", "permanent", "x", time.Hour, nil))
	c.Add(testEntry(`[1,2]`, "panic", "x", time.Hour, nil))
	var many strings.Builder
	many.WriteString("{")
	for i := range 200 {
		fmt.Fprintf(&many, "%q:%d,", fmt.Sprintf("f%03d", i), i)
	}
	many.WriteString(`"last":0}`)
	for range CensusSample {
		c.Add(testEntry(many.String(), "permanent", "x", time.Hour, nil))
	}
	if c.Messages != 104 || c.Sampled != CensusSample || c.ByClass["permanent"] != 102 || c.ByClass[ClassNone] != 1 || c.ByClass["panic"] != 1 {
		t.Fatalf("counts: %+v", c)
	}
	if c.Bodies[BodySNS] != 1 || c.Bodies[BodyEventBridge] != 1 || c.Bodies[BodyText] != 1 || c.Bodies[BodyJSON] != 97 {
		t.Fatalf("bodies: %v", c.Bodies)
	}
	if c.InnerFields["order_id"] != 1 || c.InnerFields["sku"] != 1 || len(c.InnerFields) != 2 {
		t.Fatalf("inner fields: %v", c.InnerFields)
	}
	if len(c.Fields) != censusFields || c.Fields["Message"] != 1 || c.Fields["detail"] != 1 {
		t.Fatalf("%d fields: %v", len(c.Fields), c.Fields)
	}
}
