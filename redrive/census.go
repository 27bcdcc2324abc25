package redrive

import (
	"bytes"
	"encoding/json"

	"github.com/sqsonce/sqsonce/envelope"
)

// Body shapes a [Census] counts.
const (
	BodyJSON        = "json"                       // JSON that is no envelope
	BodySNS         = string(envelope.SNS)         // an SNS notification
	BodyEventBridge = string(envelope.EventBridge) // an EventBridge event
	BodyText        = "text"                       // anything that is not JSON
)

// CensusSample is how many messages, the first looked at, a [Census]
// reads the bodies of.
const CensusSample = 100

// censusFields bounds the distinct field names a Census keeps (a body is
// outside input and may hold any number of them).
const censusFields = 50

// Census describes the messages a command looked at, so that a person
// whose filters matched nothing can see what the DLQ holds: every
// message's failure class, and the shape and top-level field names of
// the first [CensusSample] bodies. Every name in it is outside text
// (escape it where a person reads it).
type Census struct {
	// Messages counts the distinct messages looked at.
	Messages int `json:"messages"`
	// ByClass counts them by failure class ([ClassNone]: no record).
	ByClass map[string]int `json:"by_class,omitempty"`
	// Sampled is how many bodies (the first looked at) Bodies, Fields
	// and InnerFields come from.
	Sampled int `json:"sampled"`
	// Bodies counts the sampled bodies by shape: [BodyJSON], [BodySNS],
	// [BodyEventBridge] or [BodyText].
	Bodies map[string]int `json:"bodies,omitempty"`
	// Fields counts the top-level field names of the sampled JSON object
	// bodies, envelopes included (at most 50 distinct names).
	Fields map[string]int `json:"fields,omitempty"`
	// InnerFields counts the top-level field names of the JSON objects
	// inside the sampled envelopes (the SNS Message, the EventBridge
	// detail), which json filters also look at (at most 50 names).
	InnerFields map[string]int `json:"inner_fields,omitempty"`
}

// Add counts one message.
func (c *Census) Add(e Entry) {
	if c.ByClass == nil {
		c.ByClass, c.Bodies = map[string]int{}, map[string]int{}
	}
	c.Messages++
	c.ByClass[e.Class()]++
	if c.Sampled >= CensusSample {
		return
	}
	c.Sampled++
	body := e.Message.Body
	if !json.Valid([]byte(body)) {
		c.Bodies[BodyText]++
		return
	}
	c.Fields = addFields(c.Fields, body)
	kind, inner, ok := unwrap(body)
	if !ok {
		c.Bodies[BodyJSON]++
		return
	}
	c.Bodies[string(kind)]++
	c.InnerFields = addFields(c.InnerFields, inner)
}

// addFields counts the top-level field names of a JSON object.
func addFields(m map[string]int, body string) map[string]int {
	b := bytes.TrimSpace([]byte(body))
	if len(b) == 0 || b[0] != '{' {
		return m
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return m
	}
	if m == nil {
		m = map[string]int{}
	}
	for k := range obj {
		if _, ok := m[k]; ok || len(m) < censusFields {
			m[k]++
		}
	}
	return m
}
