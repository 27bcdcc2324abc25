package telemetry

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"
)

// AttrAWSTraceHeader is the SQS message system attribute in which X-Ray
// (and the AWS services and SDKs that trace with it: Lambda, SNS, API
// Gateway) carry a message's trace context.
const AttrAWSTraceHeader = "AWSTraceHeader"

// maxXRayHeader bounds the header parsed: the three fields take 87
// bytes; the rest is room for Lineage and other keys.
const maxXRayHeader = 1024

// ParseXRay reads an X-Ray tracing header
// ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
// as a remote span context: Root's two hex parts are the 128-bit trace
// ID, Parent the span ID, Sampled=1 the sampled flag (0, ? or no
// Sampled: not sampled). Other keys (Lineage, Self, ...) are ignored.
// It is strict: a header without both Root and Parent, with a repeated
// or malformed one (a version other than 1, a wrong length, upper-case
// or non-hex digits, an all-zero ID), a Sampled other than 0, 1 or ?, or
// longer than 1 KiB gives ok false.
func ParseXRay(h string) (sc trace.SpanContext, ok bool) {
	if len(h) > maxXRayHeader {
		return trace.SpanContext{}, false
	}
	var (
		tid                  trace.TraceID
		sid                  trace.SpanID
		flags                trace.TraceFlags
		root, parent, sample bool
	)
	for part := range strings.SplitSeq(h, ";") {
		part = strings.Trim(part, " \t")
		if part == "" {
			continue
		}
		k, v, found := strings.Cut(part, "=")
		if !found {
			return trace.SpanContext{}, false
		}
		switch k {
		case "Root":
			// 1-<8 hex>-<24 hex>
			if root || len(v) != 35 || v[0] != '1' || v[1] != '-' || v[10] != '-' {
				return trace.SpanContext{}, false
			}
			if !hexInto(tid[:4], v[2:10]) || !hexInto(tid[4:], v[11:]) {
				return trace.SpanContext{}, false
			}
			root = true
		case "Parent":
			if parent || len(v) != 16 || !hexInto(sid[:], v) {
				return trace.SpanContext{}, false
			}
			parent = true
		case "Sampled":
			if sample {
				return trace.SpanContext{}, false
			}
			switch v {
			case "1":
				flags = trace.FlagsSampled
			case "0", "?":
			default:
				return trace.SpanContext{}, false
			}
			sample = true
		}
	}
	if !root || !parent || !tid.IsValid() || !sid.IsValid() {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), true
}

// hexInto decodes the lower-case hex s into dst (len(s) == 2*len(dst)).
func hexInto(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Extract returns ctx with the trace context a message carries: the W3C
// traceparent (and tracestate) of its attributes, or, when it has no
// valid traceparent, the X-Ray header of its AWSTraceHeader system
// attribute (sys). A message with neither returns ctx unchanged.
func Extract(ctx context.Context, attrs map[string]types.MessageAttributeValue, sys map[string]string) context.Context {
	if sc, ok := MessageContext(attrs, sys); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// MessageContext returns the trace context a message carries, as
// [Extract] reads it; ok is false when it carries none.
func MessageContext(attrs map[string]types.MessageAttributeValue, sys map[string]string) (trace.SpanContext, bool) {
	if _, ok := attrs["traceparent"]; ok {
		sc := trace.SpanContextFromContext(Propagator.Extract(context.Background(), Carrier(attrs)))
		if sc.IsValid() {
			return sc, true
		}
	}
	if h, ok := sys[AttrAWSTraceHeader]; ok {
		return ParseXRay(h)
	}
	return trace.SpanContext{}, false
}
