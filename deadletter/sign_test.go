package deadletter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/deadletter"
)

// A signed record verifies, after a trip through its JSON, with its key
// and body only; changing any signed field, the body or the key breaks
// it; the error text (cut to fit the DLQ after signing) is not signed.
func TestSignVerify(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	f := deadletter.Failure{Error: "boom", Class: deadletter.ClassPermanent, SourceQueue: "https://sqs.us-east-1.amazonaws.com/1/a",
		Attempts: 3, OriginalMessageID: "m1", FailedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))}
	if f.Verify(key, "body") {
		t.Fatal("an unsigned record verifies")
	}
	f.Sign(key, "body")
	var back deadletter.Failure
	b, _ := json.Marshal(f)
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Verify(key, "body") {
		t.Fatalf("%s does not verify after a JSON round trip", b)
	}
	cut := back
	cut.Error = "bo…"
	if !cut.Verify(key, "body") {
		t.Fatal("cutting the error text broke the signature")
	}
	for name, change := range map[string]func(*deadletter.Failure){
		"class":        func(f *deadletter.Failure) { f.Class = "max_attempts" },
		"source":       func(f *deadletter.Failure) { f.SourceQueue = "https://sqs.us-east-1.amazonaws.com/1/b" },
		"attempts":     func(f *deadletter.Failure) { f.Attempts = 4 },
		"original id":  func(f *deadletter.Failure) { f.OriginalMessageID = "m2" },
		"failed at":    func(f *deadletter.Failure) { f.FailedAt = f.FailedAt.Add(time.Nanosecond) },
		"signature":    func(f *deadletter.Failure) { f.Signature = "x" + f.Signature[1:] },
		"no signature": func(f *deadletter.Failure) { f.Signature = "" },
		"bad base64":   func(f *deadletter.Failure) { f.Signature = "!!" },
	} {
		g := back
		change(&g)
		if g.Verify(key, "body") {
			t.Errorf("changed %s: still verifies", name)
		}
	}
	if back.Verify(key, "other body") {
		t.Error("verifies with another body")
	}
	if back.Verify([]byte(strings.Repeat("j", 32)), "body") || back.Verify(nil, "body") {
		t.Error("verifies with another key or none")
	}
	// Length prefixes: moving bytes from one field to the next changes it.
	g, h := f, f
	g.Class, g.SourceQueue = "ab", "c"
	h.Class, h.SourceQueue = "a", "bc"
	g.Sign(key, "body")
	h.Sign(key, "body")
	if g.Signature == h.Signature {
		t.Error("two records with the same concatenated fields share a signature")
	}
}

func TestCheckSigningKey(t *testing.T) {
	t.Parallel()
	if err := deadletter.CheckSigningKey([]byte("short")); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("short key: %v", err)
	}
	if err := deadletter.CheckSigningKey(make([]byte, 32)); err != nil {
		t.Fatalf("32 bytes: %v", err)
	}
}
