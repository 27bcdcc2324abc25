package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestEndToEnd runs the example as its README does, each command a
// process of the built binary, on the local stack (PostgreSQL and fauxqs):
//
//   - payments POSTed by several clients at once with the same key, each
//     retrying as client SDKs do, are created once: one row per payment,
//     and every client of a key gets the same body;
//   - the relay publishes them and the worker books each one once;
//   - an API process SIGKILLed while a request holds its key frees the key
//     with the request's transaction: the client's next retry creates the
//     payment (not 409 until a lease ends), once, and it is booked once.
func TestEndToEnd(t *testing.T) {
	testenv.Config(t) // fails, or skips outside make test, without the stack
	testenv.PostgresURL(t)
	bin := build(t)
	name := newName(t)
	if out := runOK(t, bin, "setup", "-name", name); !strings.Contains(out, "ready") {
		t.Fatalf("setup printed %q", out)
	}
	db := poolOn(t, name)
	ctx := context.Background()

	api := start(t, bin, "serve", "-name", name, "-addr", "127.0.0.1:0")
	relay := start(t, bin, "relay", "-name", name)
	worker := start(t, bin, "work", "-name", name)

	// n payments, each sent by `same` clients at once with one key.
	const n, same = 20, 5
	answers := make([][]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		answers[i] = make([]answer, same)
		body := fmt.Sprintf(`{"account":"acct-%d","amount":%d,"currency":"EUR","reference":"inv-%d"}`, i%3, 100+i, i)
		for j := range same {
			wg.Go(func() {
				answers[i][j] = payWithRetries(t, api.url, "alice", fmt.Sprintf("key-%d", i), body)
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ids := map[string]bool{}
	for i, as := range answers {
		ran := 0
		for _, a := range as {
			if a.status != http.StatusCreated || !bytes.Equal(a.body, as[0].body) {
				t.Fatalf("payment %d: the clients of one key got %d %q and %d %q; want one 201 body for all", i, as[0].status, as[0].body, a.status, a.body)
			}
			if !a.replayed {
				ran++
			}
		}
		var p payment
		if err := json.Unmarshal(as[0].body, &p); err != nil || p.Reference != fmt.Sprintf("inv-%d", i) {
			t.Fatalf("payment %d: body %q: %v", i, as[0].body, err)
		}
		if ran != 1 {
			t.Errorf("payment %d: %d answers were not replays, want 1 (the request ran once)", i, ran)
		}
		ids[p.ID] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct payment ids for %d payments", len(ids), n)
	}
	// The same JSON with its keys in another order is the same payment;
	// another payment under a used key is refused.
	if a, err := pay(api.url, "alice", "key-0", `{"reference":"inv-0","currency":"EUR","amount":100,"account":"acct-0"}`); err != nil || a.status != http.StatusCreated || !a.replayed || !bytes.Equal(a.body, answers[0][0].body) {
		t.Fatalf("key-0's payment, keys reordered: %+v, %v; want its 201 replayed", a, err)
	}
	if a, err := pay(api.url, "alice", "key-0", `{"account":"acct-0","amount":101,"currency":"EUR","reference":"inv-0"}`); err != nil || a.status != http.StatusUnprocessableEntity {
		t.Fatalf("key-0 with another amount: %+v, %v; want 422", a, err)
	}
	checkOnce(t, db, n)
	waitBooked(t, db, name, n)

	// The API is killed while a request holds its key. The test holds a
	// lock on the payments table, so the request stops at its INSERT,
	// after it claimed the key.
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE payments IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	body := `{"account":"acct-1","amount":999,"currency":"EUR","reference":"killed"}`
	first := make(chan error, 1)
	go func() {
		a, err := pay(api.url, "alice", "key-killed", body)
		if err == nil {
			err = fmt.Errorf("answered %d", a.status)
		}
		first <- err
	}()
	backend := waitBlocked(t, db)
	// Held: a retry now gets 409 at once.
	if a, err := pay(api.url, "alice", "key-killed", body); err != nil || a.status != http.StatusConflict {
		t.Fatalf("a retry while the first request holds the key: %+v, %v; want 409", a, err)
	}
	api.kill()
	if err := <-first; err == nil || strings.HasPrefix(err.Error(), "answered") {
		t.Fatalf("the request of the killed API: %v, want a broken connection", err)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL ends the dead client's session as soon as it finds its
	// socket closed (here, once its INSERT gets the lock), and with it the
	// transaction that held the key. With a lease the key would stay held
	// until the lease ran out, 30 s by default.
	waitGone(t, db, backend)
	api = start(t, bin, "serve", "-name", name, "-addr", "127.0.0.1:0") // restarted
	a, err := pay(api.url, "alice", "key-killed", body)
	if err != nil || a.status != http.StatusCreated || a.replayed {
		t.Fatalf("the client's next retry after the kill: %+v, %v; want 201, run (the key freed)", a, err)
	}
	checkOnce(t, db, n+1)
	waitBooked(t, db, name, n+1)

	for _, p := range []*proc{api, relay, worker} {
		p.stop(t)
	}
}

// answer is an HTTP answer to POST /payments.
type answer struct {
	status     int
	replayed   bool
	retryAfter string
	body       []byte
}

// client is the tests' HTTP client.
var client = &http.Client{Timeout: 2 * time.Minute}

// pay sends one POST /payments.
func pay(url, caller, key, body string) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/payments", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+caller)
	req.Header.Set(idempotency.HeaderKey, key)
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true",
		retryAfter: resp.Header.Get("Retry-After"), body: b}, nil
}

// payWithRetries sends a payment as client SDKs do: the same key on every
// attempt, again after a broken connection, a 409 or a 5xx, waiting
// Retry-After when the answer has one.
func payWithRetries(t *testing.T, url, caller, key, body string) answer {
	for range 30 {
		a, err := pay(url, caller, key, body)
		wait := 100 * time.Millisecond
		switch {
		case err != nil:
		case a.status == http.StatusConflict || a.status >= 500:
			if s, err := strconv.Atoi(a.retryAfter); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
		default:
			return a
		}
		time.Sleep(wait)
	}
	t.Errorf("key %s: no final answer after 30 attempts", key)
	return answer{}
}

// checkOnce checks that the payments table holds n payments, one per
// reference.
func checkOnce(t *testing.T, db *pgxpool.Pool, n int) {
	t.Helper()
	var rows, refs int
	if err := db.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT reference) FROM payments`).Scan(&rows, &refs); err != nil {
		t.Fatal(err)
	}
	if rows != n || refs != n {
		t.Fatalf("payments: %d rows for %d references, want %d and %d (one per payment)", rows, refs, n, n)
	}
}

// waitBooked waits until the outbox is empty, the queue is drained and
// every payment has a ledger entry, then checks that each has exactly one,
// of its amount.
func waitBooked(t *testing.T, db *pgxpool.Pool, name string, n int) {
	t.Helper()
	ctx := context.Background()
	sq := testenv.SQS(t)
	out, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var pending, booked int
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM sqsonce_outbox), (SELECT count(DISTINCT payment_id) FROM ledger_entries)`).Scan(&pending, &booked); err != nil {
			t.Fatal(err)
		}
		visible, inFlight, err := testenv.Counts(ctx, sq, aws.ToString(out.QueueUrl))
		if err != nil {
			t.Fatal(err)
		}
		if pending == 0 && booked == n && visible == 0 && inFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes: %d events in the outbox, %d visible and %d in-flight messages, %d of %d payments booked", pending, visible, inFlight, booked, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var entries, wrong int
	err = db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE e.amount <> p.amount OR e.account <> p.account)
		FROM ledger_entries e LEFT JOIN payments p ON p.id = e.payment_id`).Scan(&entries, &wrong)
	if err != nil {
		t.Fatal(err)
	}
	if entries != n || wrong != 0 {
		t.Fatalf("%d ledger entries for %d payments (%d not matching their payment); want one each", entries, n, wrong)
	}
}

// waitBlocked returns the server process (backend) waiting for the lock on
// the payments table.
func waitBlocked(t *testing.T, db *pgxpool.Pool) uint32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid uint32
		err := db.QueryRow(context.Background(), `SELECT pid FROM pg_locks WHERE locktype = 'relation' AND relation = 'payments'::regclass AND NOT granted`).Scan(&pid)
		if err == nil {
			return pid
		}
		if err != pgx.ErrNoRows || time.Now().After(deadline) {
			t.Fatalf("no request waiting on the payments table: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits until the backend pid has ended.
func waitGone(t *testing.T, db *pgxpool.Pool, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed API's session %d is still open", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// build builds the example into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "payments")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// newName returns a fresh name for the queue and the schema, deleted when
// the test ends.
func newName(t *testing.T) string {
	name := strings.ReplaceAll(testenv.Name("pay"), "-", "_")
	t.Cleanup(func() {
		ctx := context.Background()
		sq := testenv.SQS(t)
		for _, q := range []string{name, name + "-dlq"} {
			if out, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)}); err == nil {
				_, _ = sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
			}
		}
		conn, err := pgx.Connect(ctx, testenv.PostgresURL(t))
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// poolOn is the test's own pool on the schema.
func poolOn(t *testing.T, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// runOK runs a command of the binary to its end and returns its stdout.
func runOK(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("payments %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// proc is a command of the binary running as its own process.
type proc struct {
	cmd    *exec.Cmd
	url    string        // serve: the address it printed
	exited chan struct{} // closed when the process has ended
	stderr *syncBuffer
	err    error // Wait's error, once exited is closed
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), exited: make(chan struct{}), stderr: &syncBuffer{}}
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				urls <- u
			}
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("payments %s: stderr:\n%s", strings.Join(args, " "), p.stderr.String())
		}
	})
	if args[0] == "serve" {
		select {
		case p.url = <-urls:
		case <-p.exited:
			t.Fatalf("serve exited before listening: %v\n%s", p.err, p.stderr.String())
		case <-time.After(30 * time.Second):
			t.Fatal("serve printed no address within 30 s")
		}
	}
	return p
}

// stop sends SIGTERM and checks the process drains and exits 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			t.Errorf("%v after SIGTERM: %v, want exit 0\n%s", p.cmd.Args[1:], p.err, p.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Errorf("%v did not exit within 60 s of SIGTERM", p.cmd.Args[1:])
		p.kill()
	}
}

// kill sends SIGKILL and waits for the process to end; it does nothing
// to a process that has.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
