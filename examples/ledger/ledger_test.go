package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// ledgerCLI runs the ledger in-process against the local stack.
type ledgerCLI struct {
	t     *testing.T
	args  []string // -queue NAME [-fifo] [-store S]
	fifo  bool
	store string
}

// stores are the ledger's stores, for tests that run on each.
var stores = []string{storeDynamoDB, storePostgres}

// newLedgerCLIStore is a fresh ledger on store; its queues, tables or
// schema are deleted at cleanup.
func newLedgerCLIStore(t *testing.T, fifo bool, store string) *ledgerCLI {
	t.Helper()
	testenv.Config(t) // fails, or skips outside make test, without the stack
	l := &ledgerCLI{t: t, args: []string{"-queue", testenv.Name("ledger")}, fifo: fifo, store: store}
	if fifo {
		l.args = append(l.args, "-fifo")
	}
	if store == storePostgres {
		testenv.PostgresURL(t)
		l.args = append(l.args, "-store", store)
	}
	l.ok("setup")
	g := &global{name: l.args[1], fifo: fifo, store: store}
	n, _ := g.names()
	if store == storePostgres {
		t.Cleanup(func() { dropSchema(t, n.Schema) })
	}
	t.Cleanup(func() {
		ctx := context.Background()
		sq, ddb := testenv.SQS(t), testenv.Dynamo(t)
		for _, q := range []string{n.Queue, n.DLQ} {
			if out, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)}); err == nil {
				_, _ = sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
			}
		}
		for _, tb := range []string{n.DedupeTable, n.Ledger} {
			_, _ = ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(tb)})
		}
		s3c := testenv.S3(t)
		if out, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(n.Bucket)}); err == nil {
			for _, o := range out.Contents {
				_, _ = s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(n.Bucket), Key: o.Key})
			}
		}
		_, _ = s3c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(n.Bucket)})
	})
	return l
}

// dropSchema drops a postgres ledger's schema.
func dropSchema(t *testing.T, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// names are the ledger's resource names.
func (l *ledgerCLI) names() names {
	g := &global{name: l.args[1], fifo: l.fifo, store: l.store}
	n, err := g.names()
	if err != nil {
		l.t.Fatal(err)
	}
	return n
}

func (l *ledgerCLI) run(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(ctx, append(append([]string{}, l.args...), args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func (l *ledgerCLI) ok(args ...string) string {
	l.t.Helper()
	code, out, errOut := l.run(context.Background(), args...)
	if code != 0 {
		l.t.Fatalf("ledger %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// work runs the worker until the queue is drained, then cancels it as
// SIGTERM would, and checks it exits 0.
func (l *ledgerCLI) work() {
	l.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type exit struct {
		code   int
		stderr string
	}
	done := make(chan exit, 1)
	go func() {
		code, _, stderr := l.run(ctx, "work", "-concurrency", "8", "-visibility", "5s")
		done <- exit{code, stderr}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st queueStatus
		if err := json.Unmarshal([]byte(l.ok("status", "-json")), &st); err != nil {
			l.t.Fatal(err)
		}
		if st.QueueDrained {
			break
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("queue not drained: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	cancel()
	if e := <-done; e.code != 0 {
		l.t.Fatalf("work exited %d after its context was cancelled:\n%s", e.code, lastLines(e.stderr, 20))
	}
}

// TestContract drives the fixed command-line contract: setup, send with
// duplicates and malformed credits, work, balances -json in exactly the
// documented shape, and two ledgers that share nothing.
func TestContract(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		for _, fifo := range []bool{false, true} {
			t.Run(store+"/"+map[bool]string{false: "standard", true: "fifo"}[fifo], func(t *testing.T) {
				t.Parallel()
				testContract(t, store, fifo)
			})
		}
	}
}

func testContract(t *testing.T, store string, fifo bool) {
	a, b := newLedgerCLIStore(t, fifo, store), newLedgerCLIStore(t, fifo, store)
	var sent sendReport
	if err := json.Unmarshal([]byte(a.ok("send", "-n", "60", "-accounts", "3", "-dup-rate", "0.5", "-bad-rate", "0.1", "-json")), &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Distinct != 60 || sent.Duplicates != 30 || sent.Malformed != 6 || sent.Messages != 96 {
		t.Fatalf("send report %+v", sent)
	}
	b.ok("send", "-n", "5")
	a.work()

	raw := a.ok("balances", "-json")
	var bal map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &bal); err != nil || len(bal) != 2 || bal["accounts"] == nil || bal["total"] == nil {
		t.Fatalf(`balances -json = %s; want {"accounts":{...},"total":N}`, raw)
	}
	var got struct {
		Accounts map[string]int64
		Total    int64
	}
	_ = json.Unmarshal([]byte(raw), &got)
	if got.Total != sent.Total || len(got.Accounts) != len(sent.Accounts) {
		t.Fatalf("balances %+v, sent %+v", got, sent)
	}
	for acct, v := range sent.Accounts {
		if got.Accounts[acct] != v {
			t.Errorf("account %s: %d, want %d", acct, got.Accounts[acct], v)
		}
	}
	var st queueStatus
	_ = json.Unmarshal([]byte(a.ok("status", "-json")), &st)
	if st.DLQVisible < sent.Malformed {
		t.Errorf("DLQ holds %d, want the %d malformed credits", st.DLQVisible, sent.Malformed)
	}
	// Ledger b was sent credits but never worked: nothing of a's
	// reaches it, and its queue still holds its own five.
	if out := b.ok("balances", "-json"); out != "{\"accounts\":{},\"total\":0}\n" {
		t.Errorf("the other ledger's balances: %s", out)
	}
	_ = json.Unmarshal([]byte(b.ok("status", "-json")), &st)
	if st.Visible != 5 {
		t.Errorf("the other ledger's queue holds %d, want 5", st.Visible)
	}
	// Every credit is in the journal once: duplicates were not applied.
	var audit auditReport
	if err := json.Unmarshal([]byte(a.ok("audit", "-json")), &audit); err != nil {
		t.Fatal(err)
	}
	if audit.Credits != sent.Distinct || audit.Total != sent.Total || audit.AppliedTwice != 0 {
		t.Errorf("audit %+v, want %d credits totalling %d, none twice", audit, sent.Distinct, sent.Total)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{}, {"nope"}, {"-queue", "a.b", "status"}, {"send", "-n", "-1"}, {"send", "-dup-rate", "2"},
		{"work", "-log-level", "loud"}, {"work", "-concurrency", "0"}, {"balances", "extra"},
		{"-store", "mysql", "balances"}, {"work", "-tx-delay", "1s"}, {"-store", "postgres", "-queue", strings.Repeat("x", 60), "-fifo", "balances"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("ledger %v: exit %d, want 2 (usage)", args, code)
		}
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// TestStopWhileStarting: SIGTERM while a long-running command still starts
// (checking its tables, resolving its queue) is a clean stop, exit 0, as
// it is once the command runs; an orchestrator must not see it as a crash.
func TestStopWhileStarting(t *testing.T) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			l := newLedgerCLIStore(t, false, store)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			for _, cmd := range []string{"work", "relay"} {
				if code, _, stderr := l.run(ctx, cmd); code != 0 {
					t.Errorf("%s stopped while starting: exit %d, want 0\n%s", cmd, code, stderr)
				}
			}
		})
	}
}
