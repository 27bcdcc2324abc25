package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// bin holds the binaries the scenarios run: ledger and sqs-redrive.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sqsonce-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	for _, pkg := range []string{"ledger=../examples/ledger", "sqs-redrive=../cmd/sqs-redrive"} {
		name, path, _ := strings.Cut(pkg, "=")
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), path).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			os.Exit(1)
		}
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		goleak.VerifyTestMain(m, goleak.Cleanup(func(c int) { code = c }),
			// The SDK clients' idle keep-alive connections.
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
	}()
	os.Exit(code)
}

// full reports whether the full-size suite runs (make test-reliability).
func full() bool { return os.Getenv("SQSONCE_RELIABILITY") == "full" }

// size picks the short or the full figure.
func size(short, long int) int {
	if full() {
		return long
	}
	return short
}

// report prints one scenario's summary line; `make test-reliability` shows
// them.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("RELIABILITY %s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	fmt.Fprintln(os.Stderr, line)
}

// sendReport mirrors `ledger send -json`.
type sendReport struct {
	Distinct   int              `json:"distinct"`
	Total      int64            `json:"total"`
	Duplicates int              `json:"duplicates"`
	Malformed  int              `json:"malformed"`
	Messages   int              `json:"messages"`
	Accounts   map[string]int64 `json:"accounts"`
}

// ledger is one ledger example instance with its own queue and tables.
type ledger struct {
	t     *testing.T
	name  string
	store string   // the ledger's -store: dynamodb or postgres
	env   []string // the workers' environment (endpoints may point at a fault proxy)
	sqs   *sqs.Client
	ddb   *dynamodb.Client
	urls  struct{ queue, dlq string }
}

// The ledger's stores; the crash and fault scenarios run on each.
const (
	storeDynamoDB = "dynamodb"
	storePostgres = "postgres"
)

var stores = []string{storeDynamoDB, storePostgres}

func newLedger(t *testing.T) *ledger {
	t.Helper()
	return newLedgerStore(t, storeDynamoDB)
}

// newLedgerStore sets up a ledger on store (with postgres, a schema of its
// own, dropped at cleanup).
func newLedgerStore(t *testing.T, store string) *ledger {
	t.Helper()
	l := &ledger{t: t, name: testenv.Name("rel"), store: store, env: os.Environ(), sqs: testenv.SQS(t), ddb: testenv.Dynamo(t)}
	if store == storePostgres {
		testenv.PostgresURL(t)
		t.Cleanup(func() { l.pgExec("DROP SCHEMA IF EXISTS " + pgx.Identifier{l.name}.Sanitize() + " CASCADE") })
	}
	l.run("setup")
	for _, q := range []struct {
		name string
		url  *string
	}{{l.name, &l.urls.queue}, {l.name + "-dlq", &l.urls.dlq}} {
		out, err := l.sqs.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
		if err != nil {
			t.Fatalf("queue %s: %v", q.name, err)
		}
		*q.url = aws.ToString(out.QueueUrl)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, u := range []string{l.urls.queue, l.urls.dlq} {
			_, _ = l.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
		for _, tb := range []string{l.name + "-dedupe", l.name + "-accounts"} {
			_, _ = l.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(tb)})
		}
	})
	return l
}

// run runs a ledger subcommand to completion and returns its stdout.
func (l *ledger) run(args ...string) []byte {
	l.t.Helper()
	cmd := exec.Command(filepath.Join(bin, "ledger"), append([]string{"-queue", l.name, "-store", l.store}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("ledger %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func (l *ledger) send(n int, dupRate, badRate float64) sendReport {
	l.t.Helper()
	var rep sendReport
	out := l.run("send", "-n", fmt.Sprint(n), "-accounts", "20", "-dup-rate", fmt.Sprint(dupRate), "-bad-rate", fmt.Sprint(badRate), "-json")
	if err := json.Unmarshal(out, &rep); err != nil {
		l.t.Fatalf("send report %q: %v", out, err)
	}
	return rep
}

// worker is one `ledger work` process.
type worker struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func (l *ledger) startWorker(args ...string) *worker {
	l.t.Helper()
	return l.start("work", args...)
}

// start runs a long-lived ledger subcommand (work, relay, serve) as its own
// process, its output in a log file (in SQSONCE_LOG_DIR when set, kept
// after the run); it is killed at cleanup.
func (l *ledger) start(sub string, args ...string) *worker {
	l.t.Helper()
	dir := os.Getenv("SQSONCE_LOG_DIR") // to keep the logs after the run
	if dir == "" {
		dir = l.t.TempDir()
	}
	logf, err := os.CreateTemp(dir, sub+"-*.log")
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "ledger"), append([]string{"-queue", l.name, "-store", l.store, sub}, args...)...)
	cmd.Env = l.env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("start %s: %v", sub, err)
	}
	w := &worker{cmd: cmd, log: logf.Name(), done: make(chan error, 1)}
	go func() { w.done <- cmd.Wait(); logf.Close() }()
	l.t.Cleanup(func() { w.kill() })
	return w
}

// startServe runs `ledger serve` on a free port and returns its base URL.
func (l *ledger) startServe(args ...string) (*worker, string) {
	l.t.Helper()
	w := l.start("serve", append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(w.log)
		if err != nil {
			l.t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			if u, ok := bytes.CutPrefix(line, []byte("listening on ")); ok {
				return w, string(bytes.TrimSpace(u))
			}
		}
	}
	b, _ := os.ReadFile(w.log)
	l.t.Fatalf("serve did not print its address within 30 s:\n%s", b)
	return nil, ""
}

// kill sends SIGKILL (to this worker's PID only) and waits for it.
func (w *worker) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.wait()
}

func (w *worker) wait() <-chan error {
	ch := make(chan error, 1)
	go func() {
		err := <-w.done
		w.done <- err
		ch <- err
	}()
	return ch
}

// status mirrors `ledger status -json`.
type status struct {
	Visible     int  `json:"visible"`
	InFlight    int  `json:"in_flight"`
	Delayed     int  `json:"delayed"`
	DLQVisible  int  `json:"dlq_visible"`
	DLQInFlight int  `json:"dlq_in_flight"`
	Drained     bool `json:"queue_drained"`
}

func (l *ledger) status() status {
	l.t.Helper()
	var st status
	out := l.run("status", "-json")
	if err := json.Unmarshal(out, &st); err != nil {
		l.t.Fatalf("status %q: %v", out, err)
	}
	return st
}

// waitDrained waits until the queue is empty twice in a row, 2 s apart.
func (l *ledger) waitDrained(timeout time.Duration) {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	empty := 0
	for {
		st := l.status()
		if st.Visible == 0 && st.InFlight == 0 && st.Delayed == 0 {
			empty++
			if empty == 2 {
				return
			}
		} else {
			empty = 0
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("the queue did not drain within %s: %+v", timeout, st)
		}
		time.Sleep(2 * time.Second)
	}
}

// check verifies the promise: balances per account equal what was sent,
// every distinct credit is in the journal exactly once, the queue is
// empty, and the DLQ holds every malformed message (by distinct sqsonce-id)
// and nothing else. It returns the number of extra DLQ copies and the DLQ's
// messages counted by sqsonce-id.
func (l *ledger) check(sent ...sendReport) (dlqCopies int, dlq map[string]int) {
	l.t.Helper()
	want := map[string]int64{}
	var wantTotal int64
	var distinct, malformed int
	for _, s := range sent {
		for a, v := range s.Accounts {
			want[a] += v
		}
		wantTotal += s.Total
		distinct += s.Distinct
		malformed += s.Malformed
	}
	var bal struct {
		Accounts map[string]int64 `json:"accounts"`
		Total    int64            `json:"total"`
	}
	if err := json.Unmarshal(l.run("balances", "-json"), &bal); err != nil {
		l.t.Fatal(err)
	}
	if bal.Total != wantTotal {
		l.t.Errorf("total applied %d, want %d (the sum over distinct valid credits)", bal.Total, wantTotal)
	}
	for a, v := range want {
		if bal.Accounts[a] != v {
			l.t.Errorf("account %s: balance %d, want %d", a, bal.Accounts[a], v)
		}
	}
	var audit struct {
		Credits      int      `json:"credits"`
		Total        int64    `json:"total"`
		AppliedTwice int      `json:"applied_twice"`
		Examples     []string `json:"examples"`
	}
	if err := json.Unmarshal(l.run("audit", "-json"), &audit); err != nil {
		l.t.Fatal(err)
	}
	if audit.Credits != distinct || audit.AppliedTwice != 0 {
		l.t.Errorf("journal: %d credits applied (want %d), %d applied more than once %v", audit.Credits, distinct, audit.AppliedTwice, audit.Examples)
	}
	if st := l.status(); !st.Drained {
		l.t.Errorf("source queue not empty: %+v", st)
	}
	ids := l.dlqIDs()
	distinctBad := 0
	for id, n := range ids {
		if !strings.HasPrefix(id, "bad-") {
			l.t.Errorf("DLQ holds %d message(s) with id %q, which is not a malformed credit", n, id)
			continue
		}
		distinctBad++
		dlqCopies += n - 1
	}
	if distinctBad != malformed {
		l.t.Errorf("DLQ holds %d distinct malformed messages, want %d", distinctBad, malformed)
	}
	return dlqCopies, ids
}

// dlqIDs reads the whole DLQ and counts its messages by sqsonce-id. It
// reads until it has seen as many distinct messages as the queue holds, with
// a short visibility timeout, so that a receive response fauxqs loses (its
// messages stay hidden until the timeout) only delays the count.
func (l *ledger) dlqIDs() map[string]int {
	l.t.Helper()
	ctx := context.Background()
	visible, inFlight := testenv.Count(l.t, l.sqs, l.urls.dlq)
	want := visible + inFlight
	ids := map[string]int{}
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	for len(seen) < want && time.Now().Before(deadline) {
		out, err := l.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(l.urls.dlq), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 3,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			continue // a lost response: those messages come back in 3 s
		}
		for _, m := range out.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			msg := delivery.New(m, l.urls.dlq, time.Now())
			id := msg.Attribute(consumer.AttrID)
			if id == "" {
				l.t.Errorf("dead letter %s has no %s attribute", msg.ID, consumer.AttrID)
			}
			// The consumer wrote it, from this ledger's queue, with a reason.
			if f, ok := deadletter.ParseFailure(msg.Attributes); !ok {
				l.t.Errorf("dead letter %s has no readable %s attribute", msg.ID, deadletter.AttrFailure)
			} else if f.Error == "" || f.Class == "" || f.SourceQueue != l.urls.queue {
				l.t.Errorf("dead letter %s (%s): failure %+v, want a reason and a class, from %s", msg.ID, id, f, l.urls.queue)
			}
			ids[id]++
		}
	}
	if len(seen) < want {
		l.t.Errorf("read %d of the DLQ's %d messages within a minute", len(seen), want)
	}
	return ids
}

// settledLine is one of the worker logs' "settled" lines.
type settledLine struct {
	MessageID    string `json:"message_id"`
	Key          string `json:"key"`
	Outcome      string `json:"outcome"`
	ReceiveCount int    `json:"receive_count"`
}

// settled reads the workers' logs' "settled" lines. The last line of a
// killed worker's log may be cut short (a SIGKILL can stop a write to a
// file at a page boundary): one without its newline that does not parse
// is skipped.
func settled(t *testing.T, workers ...*worker) []settledLine {
	t.Helper()
	var lines []settledLine
	for _, w := range workers {
		b, err := os.ReadFile(w.log)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			if !bytes.Contains(line, []byte(`"msg":"settled"`)) {
				continue
			}
			var s settledLine
			if err := json.Unmarshal(line, &s); err != nil {
				if !bytes.HasSuffix(line, []byte("\n")) {
					// The log's last line, cut short: a SIGKILL can stop
					// a write to a file at a page boundary.
					continue
				}
				t.Fatalf("settled line %q: %v", line, err)
			}
			lines = append(lines, s)
		}
	}
	return lines
}

// logged reports whether a worker's log holds a line with this "msg".
func logged(t *testing.T, w *worker, msg string) bool {
	t.Helper()
	b, err := os.ReadFile(w.log)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(`"msg":"`+msg+`"`))
}

// settledAfterDrain counts, by outcome, the messages a worker settled after
// it began to drain: what it held (running or waiting) when SIGTERM came.
func settledAfterDrain(t *testing.T, w *worker) map[string]int {
	t.Helper()
	b, err := os.ReadFile(w.log)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(b, []byte(`"msg":"consumer draining"`))
	if !ok {
		t.Fatalf("worker log has no drain line:\n%s", b)
	}
	out := map[string]int{}
	for line := range bytes.Lines(after) {
		if !bytes.Contains(line, []byte(`"msg":"settled"`)) {
			continue
		}
		var s settledLine
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("settled line %q: %v", line, err)
		}
		out[s.Outcome]++
	}
	return out
}

// sendRaw sends one message straight to the ledger's queue.
func (l *ledger) sendRaw(body string, attrs map[string]sqstypes.MessageAttributeValue) error {
	_, err := l.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(l.urls.queue), MessageBody: aws.String(body), MessageAttributes: attrs,
	})
	return err
}

// pgConnect connects to DATABASE_URL as an administrator would.
func (l *ledger) pgConnect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, testenv.PostgresURL(l.t))
}

// pgExec runs one statement on DATABASE_URL, reporting a failure.
func (l *ledger) pgExec(sql string) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := l.pgConnect(ctx)
	if err != nil {
		l.t.Errorf("%s: %v", sql, err)
		return
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql); err != nil {
		l.t.Errorf("%s: %v", sql, err)
	}
}

// terminateWorkers ends PostgreSQL backends of this ledger's workers
// (their sessions' application_name is "ledger work <queue>") with
// pg_terminate_backend, as a failover or an operator would: with inTxOnly
// those inside a transaction, else all of them. It returns how many it
// ended and how many of those were inside a transaction.
func (l *ledger) terminateWorkers(ctx context.Context, c *pgx.Conn, inTxOnly bool) (killed, inTx int, err error) {
	err = c.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)),
		count(*) FILTER (WHERE xact_start IS NOT NULL)
		FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid() AND (NOT $2 OR xact_start IS NOT NULL)`,
		"ledger work "+l.name, inTxOnly).Scan(&killed, &inTx)
	return killed, inTx, err
}
