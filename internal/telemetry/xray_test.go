package telemetry

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"
)

const xrayHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

func TestParseXRay(t *testing.T) {
	good := []struct {
		h       string
		sampled bool
	}{
		{xrayHeader, true},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false},
		{"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?", false},
		{"Parent=53995c3f42cd8ad8; Root=1-5759e988-bd862e3fe1be46a994272793; Sampled=1", true},
		{xrayHeader + ";Lineage=a87bd80c:1|68fd508a:5|c512fbe3:2", true},
		{xrayHeader + ";Self=1-5759e988-bd862e3fe1be46a994272794;", true},
	}
	for _, c := range good {
		sc, ok := ParseXRay(c.h)
		if !ok {
			t.Errorf("ParseXRay(%q) failed", c.h)
			continue
		}
		if got := sc.TraceID().String(); got != "5759e988bd862e3fe1be46a994272793" {
			t.Errorf("ParseXRay(%q) trace ID %s", c.h, got)
		}
		if got := sc.SpanID().String(); got != "53995c3f42cd8ad8" {
			t.Errorf("ParseXRay(%q) span ID %s", c.h, got)
		}
		if sc.IsSampled() != c.sampled || !sc.IsRemote() {
			t.Errorf("ParseXRay(%q) sampled %v remote %v, want sampled %v and remote", c.h, sc.IsSampled(), sc.IsRemote(), c.sampled)
		}
	}
	bad := []string{
		"",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",                                                        // no Parent
		"Parent=53995c3f42cd8ad8;Sampled=1",                                                                         // no Root
		"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",                                          // version
		"Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8",                                           // short
		"Root=1-5759e988-bd862e3fe1be46a9942727930;Parent=53995c3f42cd8ad8",                                         // long
		"Root=1-5759E988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",                                          // upper case
		"Root=1-5759e988-bd862e3fe1be46a99427279g;Parent=53995c3f42cd8ad8",                                          // not hex
		"Root=1-5759e988xbd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",                                          // separator
		"Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8",                                          // zero trace
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000",                                          // zero span
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad",                                           // short span
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=2",                                // flag
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Sampled=0",                      // repeated
		"Root=1-5759e988-bd862e3fe1be46a994272793;Root=1-5759e988-bd862e3fe1be46a994272794;Parent=53995c3f42cd8ad8", // repeated
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent",                                                           // no value
		xrayHeader + ";Lineage=" + strings.Repeat("a", maxXRayHeader),                                               // too long
	}
	for _, h := range bad {
		if sc, ok := ParseXRay(h); ok || sc.IsValid() {
			t.Errorf("ParseXRay(%q) = %v, %v; want nothing", h, sc, ok)
		}
	}
}

// A traceparent wins over AWSTraceHeader; AWSTraceHeader is read when
// there is no valid traceparent.
func TestMessageContext(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	w3c := map[string]types.MessageAttributeValue{"traceparent": {DataType: aws.String("String"), StringValue: aws.String(tp)}}
	bad := map[string]types.MessageAttributeValue{"traceparent": {DataType: aws.String("String"), StringValue: aws.String("00-zz")}}
	sys := map[string]string{AttrAWSTraceHeader: xrayHeader}
	for _, c := range []struct {
		name  string
		attrs map[string]types.MessageAttributeValue
		sys   map[string]string
		want  string
	}{
		{"both", w3c, sys, "0af7651916cd43dd8448eb211c80319c"},
		{"w3c", w3c, nil, "0af7651916cd43dd8448eb211c80319c"},
		{"xray", nil, sys, "5759e988bd862e3fe1be46a994272793"},
		{"bad traceparent", bad, sys, "5759e988bd862e3fe1be46a994272793"},
		{"none", nil, map[string]string{AttrAWSTraceHeader: "Root=1-x"}, ""},
	} {
		sc, ok := MessageContext(c.attrs, c.sys)
		got := ""
		if ok {
			got = sc.TraceID().String()
		}
		if got != c.want {
			t.Errorf("%s: trace %q, want %q", c.name, got, c.want)
		}
	}
}

// Hostile headers give no parent, never a panic, and what is accepted
// is a valid remote context printed back the same way.
func FuzzParseXRay(f *testing.F) {
	for _, s := range []string{xrayHeader, "", ";", "Root=", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?;Lineage=x", "Root=1-\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sc, ok := ParseXRay(h)
		if !ok {
			if sc.IsValid() {
				t.Fatalf("ParseXRay(%q) failed with a valid context", h)
			}
			return
		}
		if !sc.IsValid() || !sc.IsRemote() {
			t.Fatalf("ParseXRay(%q) = %v: not a valid remote context", h, sc)
		}
		tid := sc.TraceID().String()
		if !strings.Contains(h, "Root=1-"+tid[:8]+"-"+tid[8:]) || !strings.Contains(h, "Parent="+sc.SpanID().String()) {
			t.Fatalf("ParseXRay(%q) = %v: not the header's IDs", h, sc)
		}
		if sc.TraceFlags()&^trace.FlagsSampled != 0 {
			t.Fatalf("ParseXRay(%q) flags %v", h, sc.TraceFlags())
		}
	})
}
