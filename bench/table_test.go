package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestTableTiny runs the whole table at a tiny size against the local
// stack: every row must produce a number, every row with a target a
// verdict, and the Markdown and the SVG must be written and parse.
func TestTableTiny(t *testing.T) {
	testenv.SQS(t) // fails loudly when the stack is expected and missing
	testenv.Dynamo(t)
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "docs", "bench.md"), filepath.Join(dir, "docs", "bench.svg") // docs/ does not exist yet
	var stdout, stderr bytes.Buffer
	// -isolate=false: other packages' tests use the stack meanwhile, and
	// TestIsolateDynamoDB covers the CPU masks.
	err := runTable(context.Background(), []string{"-n", "30", "-runs", "1", "-quick", "-isolate=false", "-md", md, "-svg", svg}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}

	mdText, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go run ./bench -n 30 -runs 1 -quick", "CPUs", "fewer than the 5", "DynamoDB Local sharing the CPUs with the bench and fauxqs (-isolate=false)"} {
		if !strings.Contains(string(mdText), want) {
			t.Errorf("bench.md lacks %q", want)
		}
	}
	rows := tableRows(t, string(mdText))
	if len(rows) < 20 {
		t.Fatalf("bench.md has %d rows, want every row of the table:\n%s", len(rows), mdText)
	}
	names := map[string]bool{}
	_, _, switchesCounted := osUsage()
	for _, r := range rows {
		name, value, limit, ratio, target, met := r[0], r[1], r[2], r[4], r[5], r[6]
		names[name] = true
		if value == "" || value == "-" {
			t.Errorf("row %q has no figure", name)
		}
		if target != "" && met != "yes" && met != "no" {
			t.Errorf("row %q has target %q but verdict %q", name, target, met)
		}
		if target == "" && met != "" {
			t.Errorf("row %q has no target but verdict %q", name, met)
		}
		if limit != "-" && ratio == "-" {
			t.Errorf("row %q has a limit but no ratio", name)
		}
		if switchesCounted && strings.HasPrefix(name, "FIFO, 100 groups") && !strings.Contains(r[7], "voluntary context switches per 100 messages") {
			t.Errorf("row %q's note lacks the context switches: %q", name, r[7])
		}
	}
	for _, want := range []string{
		"no-op handler, standard queue (conc 32)", "I/O-bound handler (20 ms, conc 100)", "FIFO, 100 groups, no-op (conc 32)",
		"dedupe, lease mode vs its own two writes", "latency send → delete returned, p99", "live heap growth per message, 600 msgs",
		"dedupe, transactional mode vs its own transaction, 32 at once, no SQS", "transactions in flight as each starts, transactional mode",
		"Idempotency-Key, new key vs handler + the store's 2 writes", "outbox relay, DynamoDB, vs textbook relay loop",
		"no-op consumer, telemetry on vs off (throughput)", gcRow, fifoIORow,
	} {
		if !names[want] {
			t.Errorf("bench.md lacks the row %q", want)
		}
	}
	// stdout prints the same table.
	if got := tableRows(t, stdout.String()); len(got) != len(rows) {
		t.Errorf("stdout has %d rows, bench.md %d", len(got), len(rows))
	}

	svgText, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	dec := xml.NewDecoder(bytes.NewReader(svgText))
	var root string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("bench.svg does not parse: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			texts = append(texts, string(tok))
		}
	}
	if root != "svg" {
		t.Errorf("bench.svg's root is %q", root)
	}
	all := strings.Join(texts, "\n")
	for name := range names {
		if !strings.Contains(all, name) {
			t.Errorf("bench.svg lacks the row %q", name)
		}
	}
}

// tableRows returns the cells of each body row of the Markdown table in s.
func tableRows(t *testing.T, s string) [][]string {
	t.Helper()
	var rows [][]string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| measure ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 8 {
			t.Fatalf("row with %d cells: %q", len(cells), line)
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestNewRowsTiny runs the rows of the Idempotency-Key middleware, the
// outbox relays, PostgreSQL and telemetry end to end at a tiny size: each
// must produce a figure, its limit and a verdict.
func TestNewRowsTiny(t *testing.T) {
	testenv.SQS(t)
	testenv.Dynamo(t)
	testenv.PostgresURL(t) // fails loudly when the stack is expected and PostgreSQL missing
	var stdout, stderr bytes.Buffer
	err := runTable(context.Background(), []string{"-n", "40", "-runs", "1", "-quick", "-isolate=false", "-only", "idem,outbox,postgres,telemetry"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	got := map[string][]string{}
	for _, r := range tableRows(t, stdout.String()) {
		got[r[0]] = r
	}
	for _, want := range []string{
		"Idempotency-Key, new key vs handler + the store's 2 writes", "Idempotency-Key, replay vs handler + the store's 1 write",
		"Idempotency-Key, new key vs bare handler (raw)", "Idempotency-Key, replay vs bare handler (raw)",
		"Go CPU per request, new key vs handler + 2 writes", "Go CPU per request, replay vs handler + 1 write",
		"outbox relay, DynamoDB, vs plain SendMessageBatch loop (raw)", "outbox relay, DynamoDB, vs textbook relay loop",
		"dedupepg Transactional vs textbook transaction",
		"outbox relay, PostgreSQL, vs plain SendMessageBatch loop (raw)", "outbox relay, PostgreSQL, vs textbook relay loop",
		"outbox relay, DynamoDB, 4 entities, vs ordered send loop", "outbox relay, PostgreSQL, 4 entities, vs ordered send loop",
		"no-op consumer, telemetry on vs off (throughput)", "Go CPU per message, telemetry on vs off", "heap allocations per message, telemetry on vs off",
		"Go CPU per message, spans sampled out vs telemetry off",
	} {
		r, ok := got[want]
		if !ok {
			t.Errorf("no row %q in:\n%s", want, stdout.String())
			continue
		}
		value, limit, ratio, met := r[1], r[2], r[4], r[6]
		if value == "-" || value == "0" || limit == "-" || ratio == "-" {
			t.Errorf("row %q: figure %q, limit %q, ratio %q", want, value, limit, ratio)
		}
		if r[5] != "" && met != "yes" && met != "no" {
			t.Errorf("row %q: verdict %q", want, met)
		}
	}
}

// TestPostgresRowsSkipped: without DATABASE_URL the PostgreSQL rows are
// left out, and both the output and bench.md say why.
func TestPostgresRowsSkipped(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	md := filepath.Join(t.TempDir(), "bench.md")
	var stdout, stderr bytes.Buffer
	if err := runTable(context.Background(), []string{"-n", "10", "-runs", "1", "-only", "postgres", "-md", md}, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	text, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "bench.md": string(text)} {
		if !strings.Contains(s, "PostgreSQL rows skipped: DATABASE_URL is not set") {
			t.Errorf("%s does not say the PostgreSQL rows were skipped:\n%s", name, s)
		}
	}
	if rows := tableRows(t, stdout.String()); len(rows) != 0 {
		t.Errorf("%d rows without DATABASE_URL", len(rows))
	}
}

// TestDrainRowsRunMoreRounds: the no-op drain rows (standard and FIFO)
// run 2×runs − 1 rounds and say so in their notes; the other rows run
// -runs rounds.
func TestDrainRowsRunMoreRounds(t *testing.T) {
	testenv.SQS(t)
	var stdout, stderr bytes.Buffer
	err := runTable(context.Background(), []string{"-n", "10", "-runs", "2", "-quick", "-isolate=false", "-only", "noop,io,fifo"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"no-op: run 3 of 3 done", "fifo-100: run 3 of 3 done", "fifo-10: run 3 of 3 done", "io: run 2 of 2 done", "mixed: run 2 of 2 done"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "io: run 3 of") {
		t.Errorf("the I/O row ran a third round:\n%s", stderr.String())
	}
	rounds := map[string]string{
		"no-op handler, standard queue (conc 32)": "of 3 interleaved runs",
		"FIFO, 100 groups, no-op (conc 32)":       "of 3 interleaved runs",
		"FIFO, 10 groups, no-op (conc 32)":        "of 3 interleaved runs",
		"I/O-bound handler (20 ms, conc 100)":     "of 2 interleaved runs",
	}
	seen := 0
	for _, r := range tableRows(t, stdout.String()) {
		want, ok := rounds[r[0]]
		if !ok {
			continue
		}
		seen++
		if note := r[len(r)-1]; !strings.Contains(note, want) {
			t.Errorf("row %q: note does not say %q: %s", r[0], want, note)
		}
	}
	if seen != len(rounds) {
		t.Errorf("found %d of the %d rows:\n%s", seen, len(rounds), stdout.String())
	}
}
