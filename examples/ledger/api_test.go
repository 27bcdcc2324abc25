package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/producer"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// ledgerBinary builds the ledger once per test run.
func ledgerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ledger-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ledger")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a ledger subcommand running as its own process.
type proc struct {
	cmd  *exec.Cmd
	url  string // serve: the base URL it printed
	done chan error
}

func (l *ledgerCLI) start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(ledgerBinary(t), append(append([]string{}, l.args...), args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				lines <- u
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	if args[0] == "serve" {
		select {
		case p.url = <-lines:
		case err := <-p.done:
			t.Fatalf("serve exited before listening: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not print its address within 30 s")
		}
	}
	return p
}

// stop sends SIGTERM and checks the exit code is 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("%v after SIGTERM: %v, want exit 0", p.cmd.Args[1:], err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not exit within 30 s of SIGTERM", p.cmd.Args[1:])
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (l *ledgerCLI) apiCleanup(t *testing.T) {
	if l.store == storePostgres {
		return // the schema goes, with every table
	}
	n := l.names()
	t.Cleanup(func() {
		ddb := testenv.Dynamo(t)
		for _, tb := range []string{n.IdempotencyTable, n.Outbox} {
			_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(tb)})
		}
	})
}

type httpAnswer struct {
	status     int
	replayed   bool
	retryAfter string
	typ        string
	credit     creditResponse
}

func post(t *testing.T, url, token, key, body string) httpAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/credits", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := httpAnswer{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true", retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(b, &a.credit); err != nil {
			t.Fatalf("201 body %q: %v", b, err)
		}
	} else {
		var p struct{ Type string }
		_ = json.Unmarshal(b, &p)
		a.typ = p.Type
		if ct := resp.Header.Get("Content-Type"); ct != idempotency.ProblemContentType {
			t.Fatalf("%d with Content-Type %q, want problem+json", resp.StatusCode, ct)
		}
	}
	return a
}

// The statuses of the API, one by one, on two servers sharing the tables.
func TestServeStatuses(t *testing.T) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { testServeStatuses(t, store) })
	}
}

func testServeStatuses(t *testing.T, store string) {
	l := newLedgerCLIStore(t, false, store)
	l.apiCleanup(t)
	slow := l.start(t, "serve", "-addr", "127.0.0.1:0", "-handler-delay", "1500ms")
	fast := l.start(t, "serve", "-addr", "127.0.0.1:0")
	good := `{"account":"acct-1","amount":5,"note":"ignored"}`

	if a := post(t, fast.url, "", "k0", good); a.status != http.StatusUnauthorized {
		t.Fatalf("no bearer token: %d", a.status)
	}
	if a := post(t, fast.url, "alice", "", good); a.status != http.StatusBadRequest || a.typ != idempotency.TypeKeyMissing {
		t.Fatalf("no key: %d %s", a.status, a.typ)
	}
	// A broken body is refused and not stored: the same key then succeeds.
	if a := post(t, fast.url, "alice", "k1", `{"account":"acct-1","amount":5.5}`); a.status != http.StatusBadRequest || a.typ != typeInvalidCredit {
		t.Fatalf("broken body: %d %s", a.status, a.typ)
	}
	first := post(t, fast.url, "alice", "k1", good)
	if first.status != http.StatusCreated || first.replayed || first.credit.Account != "acct-1" || first.credit.Amount != 5 || first.credit.CreditID == "" {
		t.Fatalf("first: %+v", first)
	}
	// A retry to the other server replays the stored response.
	again := post(t, slow.url, "alice", "k1", good)
	if again.status != http.StatusCreated || !again.replayed || again.credit != first.credit {
		t.Fatalf("replay: %+v, want %+v replayed", again, first.credit)
	}
	// Another caller's key of the same name is its own.
	bob := post(t, fast.url, "bob", "k1", good)
	if bob.status != http.StatusCreated || bob.replayed || bob.credit.CreditID == first.credit.CreditID {
		t.Fatalf("another scope: %+v", bob)
	}
	// The same key with another body: 422.
	if a := post(t, fast.url, "alice", "k1", `{"account":"acct-1","amount":6}`); a.status != http.StatusUnprocessableEntity || a.typ != idempotency.TypeKeyReused {
		t.Fatalf("reuse: %d %s", a.status, a.typ)
	}
	// While the first request runs (1.5 s on the slow server): 409 with Retry-After.
	var wg sync.WaitGroup
	var running httpAnswer
	wg.Go(func() { running = post(t, slow.url, "alice", "k2", good) })
	time.Sleep(500 * time.Millisecond)
	if a := post(t, fast.url, "alice", "k2", good); a.status != http.StatusConflict || a.typ != idempotency.TypeInProgress || a.retryAfter == "" {
		t.Fatalf("while running: %+v", a)
	}
	// Another body while it runs: 422, or 409 on PostgreSQL, where the
	// running request's record is in its uncommitted transaction and only
	// the key's lock shows (422 once it has committed).
	wantReuse := http.StatusUnprocessableEntity
	if store == storePostgres {
		wantReuse = http.StatusConflict
	}
	if a := post(t, fast.url, "alice", "k2", `{"account":"acct-1","amount":7}`); a.status != wantReuse {
		t.Fatalf("another body while running: %d, want %d", a.status, wantReuse)
	}
	wg.Wait()
	if running.status != http.StatusCreated {
		t.Fatalf("the slow request: %+v", running)
	}
	slow.stop(t)
	fast.stop(t)
}

// A client whose token is refreshed between retries (CALLER.SECRET: a new
// secret, the same caller) is the same caller: its retry with the same key
// is a replay of the one credit, not a second credit. A bare token is its
// own caller.
func TestServeTokenRefresh(t *testing.T) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { testServeTokenRefresh(t, store) })
	}
}

func testServeTokenRefresh(t *testing.T, store string) {
	l := newLedgerCLIStore(t, false, store)
	l.apiCleanup(t)
	s := l.start(t, "serve", "-addr", "127.0.0.1:0")
	good := `{"account":"acct-1","amount":5}`
	first := post(t, s.url, "alice.secret-1", "k1", good)
	if first.status != http.StatusCreated || first.replayed {
		t.Fatalf("first: %+v", first)
	}
	for _, token := range []string{"alice.secret-2", "alice"} {
		again := post(t, s.url, token, "k1", good)
		if again.status != http.StatusCreated || !again.replayed || again.credit != first.credit {
			t.Fatalf("retry with token %q: %d replayed=%v credit %+v; want the first credit %+v replayed", token, again.status, again.replayed, again.credit, first.credit)
		}
	}
	// Another caller's key of the same name is its own.
	if bob := post(t, s.url, "bob.secret-1", "k1", good); bob.status != http.StatusCreated || bob.replayed || bob.credit.CreditID == first.credit.CreditID {
		t.Fatalf("another caller: %+v", bob)
	}
	s.stop(t)
}

// Clients retrying keys (concurrently, after dropped connections, against
// both servers) while one server and the relay are killed with SIGKILL and
// restarted: every distinct 201 is applied exactly once.
func TestServeRelayCrashes(t *testing.T) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { testServeRelayCrashes(t, store) })
	}
}

func testServeRelayCrashes(t *testing.T, store string) {
	l := newLedgerCLIStore(t, false, store)
	l.apiCleanup(t)
	s1 := l.start(t, "serve", "-addr", "127.0.0.1:0", "-handler-delay", "20ms")
	s2 := l.start(t, "serve", "-addr", "127.0.0.1:0")
	relay := l.start(t, "relay")
	relay2 := l.start(t, "relay")

	type result struct {
		rep  postReport
		code int
		err  string
	}
	out := make(chan result, 1)
	go func() {
		code, stdout, stderr := l.run(context.Background(), "post", "-servers", s1.url+","+s2.url, "-n", "300", "-accounts", "7", "-json")
		var r postReport
		_ = json.Unmarshal([]byte(stdout), &r)
		out <- result{r, code, stderr}
	}()
	time.Sleep(time.Second)
	s1.kill()
	relay.kill()
	s1 = l.start(t, "serve", "-addr", "127.0.0.1:0") // a new address: clients fail over to s2 meanwhile
	relay = l.start(t, "relay")
	res := <-out
	if res.code != 0 {
		t.Fatalf("post: exit %d: %s", res.code, res.err)
	}
	if res.rep.Created != 300 || res.rep.Reused == 0 || res.rep.Invalid == 0 || res.rep.Replays == 0 {
		t.Fatalf("post report %+v", res.rep)
	}
	l.work() // until the queue is drained (the relays keep publishing meanwhile)
	deadline := time.Now().Add(time.Minute)
	var bal struct {
		Accounts map[string]int64 `json:"accounts"`
		Total    int64            `json:"total"`
	}
	for {
		if err := json.Unmarshal([]byte(l.ok("balances", "-json")), &bal); err != nil {
			t.Fatal(err)
		}
		if bal.Total == res.rep.Total || time.Now().After(deadline) {
			break
		}
		l.work()
	}
	if bal.Total != res.rep.Total || len(bal.Accounts) != len(res.rep.Accounts) {
		t.Fatalf("balances %+v, want the distinct 201s %+v", bal, res.rep.Accounts)
	}
	for a, want := range res.rep.Accounts {
		if bal.Accounts[a] != want {
			t.Fatalf("account %s: balance %d, want %d", a, bal.Accounts[a], want)
		}
	}
	for _, p := range []*proc{s1, s2, relay, relay2} {
		p.stop(t)
	}
}

// With -fifo each account's credits reach the queue in the order their
// POSTs committed.
func TestRelayFIFOOrder(t *testing.T) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { testRelayFIFOOrder(t, store) })
	}
}

func testRelayFIFOOrder(t *testing.T, store string) {
	l := newLedgerCLIStore(t, true, store)
	l.apiCleanup(t)
	s := l.start(t, "serve", "-addr", "127.0.0.1:0")
	relays := []*proc{l.start(t, "relay"), l.start(t, "relay")}
	code, stdout, stderr := l.run(context.Background(), "post", "-servers", s.url, "-n", "60", "-accounts", "4", "-sequential", "-json")
	if code != 0 {
		t.Fatalf("post: %s", stderr)
	}
	var rep postReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	n := l.names()
	sq := testenv.SQS(t)
	c := clients{sqs: sq}
	queueURL, err := c.queueURL(context.Background(), n.Queue)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, m := range testenv.Receive(t, sq, queueURL, 60, true) {
		group := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
		got[group] = append(got[group], aws.ToString(m.MessageAttributes[producer.AttrID].StringValue))
	}
	for account, want := range rep.Order {
		if strings.Join(got[account], ",") != strings.Join(want, ",") {
			t.Fatalf("account %s: queue order %v, want the commit order %v", account, got[account], want)
		}
	}
	for _, p := range append(relays, s) {
		p.stop(t)
	}
}
