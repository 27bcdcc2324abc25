package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

func TestMoveJSONAndFlagsAnywhere(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 6, "permanent")
	putDead(t, client, dlq, src, 3, "max_attempts")
	// Dry runs: flags after and before the positional argument; by name and by URL.
	for _, args := range [][]string{
		{"move", name(dlq), "--to", name(src), "--dry-run", "--json"},
		{"move", "--to", src, "--dry-run", "--json", dlq},
		{"move", "--dry-run", "--yes", "--json", "--class", "permanent", name(dlq)},
	} {
		code, out, errOut := cli(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		o := summaryOf(t, out)
		want := 9
		if strings.Contains(strings.Join(args, " "), "--class") {
			want = 6
		}
		if o["dry_run"] != true || num(o, "moved") != 0 || num(o, "matched") != want {
			t.Fatalf("%v: %s", args, out)
		}
	}
	if n := count(t, client, dlq); n != 9 {
		t.Fatalf("dry runs changed the dlq: %d", n)
	}
	code, out, errOut := cli(t, "move", dlq, "--yes", "--json", "--filter", "class=max_attempts")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	o := summaryOf(t, out)
	byClass, _ := o["by_class"].(map[string]any)
	if num(o, "moved") != 3 || num(o, "skipped") != 6 || num(o, "failed") != 0 || o["dry_run"] != false || byClass["max_attempts"] != 3.0 {
		t.Fatalf("summary %s", out)
	}
	if count(t, client, src) != 3 || count(t, client, dlq) != 6 {
		t.Fatal("wrong counts after the move")
	}
	// Human output: a summary line with moved, skipped, failed, elapsed.
	code, out, errOut = cli(t, "move", dlq, "--yes")
	if code != 0 || !strings.Contains(out, "moved 6, skipped 0, failed 0 in ") || !strings.Contains(out, "by class: permanent=6") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
}

func TestYesRequiredWithoutTerminal(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 4, "permanent")
	code, _, errOut := cli(t, "move", dlq)
	if code != 2 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := cli(t, "move", dlq, "--dry-run"); code != 0 {
		t.Fatalf("dry run without --yes: exit %d: %s", code, errOut)
	}
	if count(t, client, dlq) != 4 || count(t, client, src) != 0 {
		t.Fatal("something moved")
	}
}

func TestMaxExact(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 13, "permanent")
	code, out, errOut := cli(t, "move", "--max", "7", dlq, "--yes", "--json")
	if code != 0 || num(summaryOf(t, out), "moved") != 7 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if count(t, client, src) != 7 || count(t, client, dlq) != 6 {
		t.Fatal("wrong counts")
	}
	code, out, _ = cli(t, "move", "--max", "100", dlq, "--yes", "--json")
	if code != 0 || num(summaryOf(t, out), "moved") != 6 {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestPeek(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 5, "permanent")
	code, out, errOut := cli(t, "peek", dlq, "-n", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	for _, l := range lines {
		var o map[string]any
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		if o["class"] != "permanent" || o["error"] != "boom permanent" || o["attempts"] != 3.0 || o["source_queue"] != src || o["age_seconds"].(float64) < 3000 {
			t.Fatalf("peek line %s", l)
		}
		if _, ok := o["body"]; ok {
			t.Fatal("body shown without --body")
		}
	}
	code, out, _ = cli(t, "peek", "--body", dlq, "-n", "1")
	if code != 0 || !strings.Contains(out, `body:`) || !strings.Contains(out, `"class":"permanent"`) || !strings.Contains(out, "error:     boom permanent") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if v, f := testenv.Count(t, client, dlq); v != 5 || f != 0 {
		t.Fatalf("after peek: %d visible, %d in flight", v, f)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 2, "permanent")
	code, out, errOut := cli(t, "list", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	found := false
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var o map[string]any
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if o["dlq"] == name(dlq) {
			found = true
			srcs, _ := o["sources"].([]any)
			if len(srcs) != 1 || srcs[0] != name(src) || o["messages"] != 2.0 || o["oldest_age_seconds"].(float64) < 3000 {
				t.Fatalf("list line %s", l)
			}
		}
	}
	if !found {
		t.Fatalf("dlq not listed")
	}
	if code, out, _ := cli(t, "list"); code != 0 || !strings.Contains(out, name(dlq)) || !strings.Contains(out, "SOURCES") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestExportImport(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 7, "permanent")
	file := filepath.Join(t.TempDir(), "backup.jsonl")
	code, out, errOut := cli(t, "export", dlq, file, "--delete", "--yes", "--json")
	if code != 0 || num(summaryOf(t, out), "moved") != 7 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	b, _ := os.ReadFile(file)
	if strings.Count(string(b), "\n") != 7 || count(t, client, dlq) != 0 {
		t.Fatalf("export wrote %d lines, dlq has %d", strings.Count(string(b), "\n"), count(t, client, dlq))
	}
	if code, _, errOut := cli(t, "export", dlq, file); code != 1 || !strings.Contains(errOut, "exists") {
		t.Fatalf("overwrite: exit %d: %s", code, errOut)
	}
	code, out, errOut = cli(t, "import", file, name(dlq), "--yes", "--json")
	if code != 0 || num(summaryOf(t, out), "moved") != 7 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if count(t, client, dlq) != 7 {
		t.Fatal("import did not restore the dlq")
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	fifo, _ := testenv.Queue(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true})
	putDead(t, client, dlq, src, 3, "permanent")
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"body\":\"ok\"}\n{\"body\":\n"), 0o600)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"move", "no-such-queue-" + testenv.Name("x"), "--yes"}, 1, "unknown queue"},
		{[]string{"move", dlq, "--to", fifo, "--yes"}, 1, "FIFO"},
		{[]string{"move", dlq, "--to", "missing-" + testenv.Name("x"), "--yes"}, 1, "unknown queue"},
		{[]string{"move", dlq, "--filter", "colour=red", "--yes"}, 2, "bad filter"},
		{[]string{"move", dlq, "--body-match", "(", "--yes"}, 2, "bad filter"},
		{[]string{"move", dlq, "--older-than", "yesterday", "--yes"}, 2, "bad filter"},
		{[]string{"move", dlq, "--max", "-1", "--yes"}, 2, "negative"},
		{[]string{"move", "--yes"}, 2, "move DLQ"},
		{[]string{"move", dlq, "--nope"}, 2, "not defined"},
		{[]string{"import", filepath.Join(dir, "missing.jsonl"), src, "--yes"}, 1, "cannot read export file"},
		{[]string{"import", bad, src, "--yes"}, 1, "line 2"},
		{[]string{"import", dir, src, "--yes"}, 1, "export file"},
		{[]string{"export", dlq, "-", "--delete", "--yes"}, 2, "--delete"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"native", "launch", dlq}, 2, "unknown native command"},
		{[]string{"--endpoint-url", "http://127.0.0.1:1", "list"}, 2, "unknown command"},
		{[]string{"list", "--endpoint-url", "http://127.0.0.1:1"}, 1, ""},
	}
	for _, c := range cases {
		code, _, errOut := cli(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d (want %d): %s", c.args, code, c.code, errOut)
		}
	}
	if v, f := testenv.Count(t, client, dlq); v != 3 || f != 0 || count(t, client, src) != 0 || count(t, client, fifo) != 0 {
		t.Fatalf("bad input moved something: dlq %d/%d", v, f)
	}
	if code, out, _ := cli(t, "help"); code != 0 || !strings.Contains(out, "usage: sqs-redrive") {
		t.Fatalf("help: %d", code)
	}
}

// The endpoint comes from the flags or the SDK's variables, never from a
// queue URL's host.
func TestQueueURLHostIgnored(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 2, "permanent")
	foreign := "https://sqs.eu-west-3.amazonaws.invalid" + dlq[strings.Index(dlq[len("http://"):], "/")+len("http://"):]
	code, out, errOut := cli(t, "peek", foreign, "--json")
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	code, out, errOut = cli(t, "--help")
	if code != 0 || !strings.Contains(out, "AWS_ENDPOINT_URL_SQS") {
		t.Fatalf("help: %d %s", code, errOut)
	}
	code, _, errOut = cli(t, "peek", dlq, "--endpoint-url", os.Getenv("AWS_ENDPOINT_URL_SQS"), "--region", "us-east-1")
	if code != 0 {
		t.Fatalf("explicit endpoint: exit %d: %s", code, errOut)
	}
}

func TestNative(t *testing.T) {
	t.Parallel()
	client := testenv.MoveTaskSQS(t)
	endpoint := os.Getenv("SQSONCE_MOVE_TASK_ENDPOINT")
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 4, "permanent")
	code, out, errOut := cli(t, "native", "start", dlq, "--to", src, "--wait", "--endpoint-url", endpoint)
	if code != 0 || !strings.Contains(out, "started move task") || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("start: exit %d: %s %s", code, out, errOut)
	}
	if count(t, client, src) != 4 {
		t.Fatalf("source has %d", count(t, client, src))
	}
	code, out, errOut = cli(t, "native", "status", "--json", dlq, "--endpoint-url", endpoint)
	if code != 0 || !strings.Contains(out, `"status":"COMPLETED"`) {
		t.Fatalf("status: exit %d: %s %s", code, out, errOut)
	}
	code, _, errOut = cli(t, "native", "cancel", dlq, "--endpoint-url", endpoint)
	if code != 1 || !strings.Contains(errOut, "no running move task") {
		t.Fatalf("cancel: exit %d: %s", code, errOut)
	}
}

// The CLI once as a built binary, with stdin not a terminal.
func TestBuiltBinary(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 5, "permanent")
	bin := filepath.Join(t.TempDir(), "sqs-redrive")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "move", dlq, "--json")
	out, err := cmd.Output()
	if cmd.ProcessState.ExitCode() != 2 || len(out) != 0 {
		t.Fatalf("without --yes: %v %s", err, out)
	}
	out, err = exec.Command(bin, "move", dlq, "--yes", "--json").Output()
	if err != nil || num(summaryOf(t, string(out)), "moved") != 5 {
		t.Fatalf("%v %s", err, out)
	}
	if count(t, client, src) != 5 {
		t.Fatal("binary did not move")
	}
}
