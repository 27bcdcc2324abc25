package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// Environment of a child process: the test binary re-executed as the CLI.
const (
	envChild      = "SQS_REDRIVE_TEST_CHILD"        // JSON array of the CLI arguments
	envCrashAfter = "SQS_REDRIVE_TEST_KILL_AT_SENT" // SIGKILL itself at this "sent" progress report
)

func TestMain(m *testing.M) {
	if args := os.Getenv(envChild); args != "" {
		os.Exit(child(args))
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// child runs the CLI, killing itself with SIGKILL between a send and its
// delete when asked: the crash the move must survive.
func child(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, syncDir: syncDir}
	if at, _ := strconv.Atoi(os.Getenv(envCrashAfter)); at > 0 {
		sent := 0
		a.progressHook = func(p redrive.Progress) {
			if p.Phase == redrive.PhaseSent {
				if sent++; sent == at {
					p, _ := os.FindProcess(os.Getpid())
					p.Kill() // SIGKILL: no deferred cleanup, no release
					select {}
				}
			}
		}
	}
	return a.run(context.Background(), args)
}

// cli runs the CLI in-process.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// putDead sends n dead letters recording source, as the consumer writes them.
func putDead(t *testing.T, client *sqs.Client, dlq, source string, n int, class string) {
	t.Helper()
	for i := 0; i < n; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			f, _ := json.Marshal(deadletter.Failure{Error: "boom " + class, Class: class, SourceQueue: source, Attempts: 3,
				OriginalMessageID: fmt.Sprintf("orig-%d", j), FailedAt: time.Now().Add(-time.Hour).UTC()})
			entries = append(entries, types.SendMessageBatchRequestEntry{
				Id:          aws.String(fmt.Sprint(j - i)),
				MessageBody: aws.String(fmt.Sprintf(`{"n":%d,"class":%q}`, j, class)),
				MessageAttributes: map[string]types.MessageAttributeValue{
					consumer.AttrID:        {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprintf("job-%s-%d", class, j))},
					deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(f))},
				},
			})
		}
		out, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(dlq), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("put dead letters: %v %v", err, out)
		}
	}
}

// counts returns visible + in-flight of a queue.
func count(t *testing.T, client *sqs.Client, url string) int {
	v, f := testenv.Count(t, client, url)
	return v + f
}

// summaryOf decodes the one JSON summary line.
func summaryOf(t *testing.T, stdout string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one JSON line, got %q", stdout)
	}
	var o map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &o); err != nil {
		t.Fatalf("summary %q: %v", stdout, err)
	}
	for _, k := range []string{"moved", "skipped", "failed", "dry_run", "by_class", "elapsed_seconds"} {
		if _, ok := o[k]; !ok {
			t.Fatalf("summary %q has no %s", stdout, k)
		}
	}
	return o
}

func num(o map[string]any, k string) int {
	f, _ := o[k].(float64)
	return int(f)
}

// name is the last path segment of a queue URL.
func name(url string) string { return url[strings.LastIndex(url, "/")+1:] }
