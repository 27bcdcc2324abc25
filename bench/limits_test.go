package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestLimitRowsTiny runs the limits rows end to end at a tiny size (three
// ledger workers at -rate 50 for 5 s): each must produce a figure, its
// limit and a verdict, and the fleet must have charged every credit once.
func TestLimitRowsTiny(t *testing.T) {
	testenv.SQS(t)
	testenv.Dynamo(t)
	var stdout, stderr bytes.Buffer
	err := runTable(context.Background(), []string{"-n", "40", "-runs", "1", "-quick", "-isolate=false", "-only", "limits"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	got := map[string][]string{}
	for _, r := range tableRows(t, stdout.String()) {
		got[r[0]] = r
	}
	for _, want := range []string{
		"fleet rate: 3 workers, -rate 50, charges per second", "fleet rate: the busiest second, -rate 50",
		"fleet per-key limit: most charges of one account at once, -account-concurrency 2",
		"Go CPU per message, limits set and not reached vs none",
	} {
		r, ok := got[want]
		if !ok {
			t.Errorf("no row %q in:\n%s", want, stdout.String())
			continue
		}
		value, limit, ratio, met := r[1], r[2], r[4], r[6]
		if value == "-" || value == "0" || limit == "-" || ratio == "-" || (met != "yes" && met != "no") {
			t.Errorf("row %q: figure %q, limit %q, ratio %q, verdict %q", want, value, limit, ratio, met)
		}
		if strings.HasPrefix(want, "fleet per-key") && !strings.Contains(r[len(r)-1], ", 0 twice") {
			t.Errorf("row %q: a credit was charged twice: %s", want, r[len(r)-1])
		}
	}
}
