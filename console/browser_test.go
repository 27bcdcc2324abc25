package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/chromedp/chromedp"

	"github.com/sqsonce/sqsonce/console"
	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/redrive"
)

// The browser tests drive Debian's chromium package, headless, through
// chromedp, against consoles over the local stack. `make test` (through
// localstack/stack.sh) installs chromium when it runs as root; with
// SQSONCE_INTEGRATION=1 a missing chromium fails the tests.
//
// SQSONCE_UPDATE_SCREENSHOTS=1 copies the screenshots they take into
// docs/ (console-overview.png, console-dlq.png), which docs/console.md shows.

// chromium returns the path of the chromium binary.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("SQSONCE_INTEGRATION=1 but chromium is missing (%v): `make stack-up` installs Debian's chromium package when run as root; otherwise apt-get install chromium", err)
		}
		t.Skip("browser test: chromium is not installed (apt-get install chromium, or run `make test`)")
	}
	return path
}

// browser starts a headless Chromium for the test, with a user data
// directory of its own; the test's cleanup closes it and waits for it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	dir := t.TempDir() // removed after the browser is closed (cleanups run last first)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 860))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		tctx, tcancel := context.WithTimeout(bctx, 15*time.Second)
		if err := chromedp.Cancel(tctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close chromium: %v", err)
		}
		tcancel()
		bcancel()
		acancel()
	})
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return bctx
}

// run runs browser steps, failing the test after a minute.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript expression is true in the page, across
// the navigations a click starts, failing the test after a minute.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, err := chromedp.Run(tctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %s stayed false for a minute (last error: %v)", what, expr, last)
}

// screenshot saves the page as name in a temporary directory and, with
// SQSONCE_UPDATE_SCREENSHOTS=1, in docs/ too.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
	if os.Getenv("SQSONCE_UPDATE_SCREENSHOTS") == "1" {
		if err := os.WriteFile(filepath.Join("..", "docs", name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// validation is a failure of the application's own class.
type validation struct{ msg string }

func (v validation) Error() string        { return v.msg }
func (v validation) FailureClass() string { return "validation" }

// queues is a source queue and its DLQ on the local stack, named base
// and base-dlq.
type queues struct {
	client             *sqs.Client
	base, src, dlq     string
	dlqName            string
	permanent, invalid []string // bodies, by the failure the consumer gives them
}

// newQueues creates a source queue and its DLQ, deleted when the test
// ends, named after a fresh unique base so that a console's prefix holds
// only them.
func newQueues(t *testing.T, client *sqs.Client, stem string) *queues {
	t.Helper()
	ctx := context.Background()
	q := &queues{client: client, base: testenv.Name(stem)}
	q.dlqName = q.base + "-dlq"
	create := func(name string, attrs map[string]string) string {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatalf("create queue %s: %v", name, err)
		}
		t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		return aws.ToString(out.QueueUrl)
	}
	q.dlq = create(q.dlqName, nil)
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	q.src = create(q.base, map[string]string{
		"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, a.Attributes["QueueArn"]),
		"VisibilityTimeout": "10",
	})
	return q
}

// deadLetters sends the bodies to the source queue and runs a real
// consumer whose handler fails each: "negative" ones with
// consumer.Permanent("amount is negative"), "unknown" ones with a
// validation error of their own class ("account unknown"), and the
// hostile body with consumer.Permanent(hostileReason). It returns once
// the DLQ holds all of them.
func (q *queues) deadLetters(t *testing.T, negative, unknown int, hostile bool) {
	t.Helper()
	ctx := context.Background()
	var bodies []string
	for i := range negative {
		q.permanent = append(q.permanent, fmt.Sprintf(`{"credit":%d,"amount":-%d}`, i, 10+i))
	}
	for i := range unknown {
		q.invalid = append(q.invalid, fmt.Sprintf(`{"credit":%d,"account":"acct-%d"}`, 100+i, i))
	}
	bodies = append(append(bodies, q.permanent...), q.invalid...)
	if hostile {
		bodies = append(bodies, hostileBody)
	}
	for _, b := range bodies {
		if _, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.src), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	q.consume(t, len(bodies), q.dlq, func(_ context.Context, m *consumer.Message) error {
		switch {
		case m.Body == hostileBody:
			return consumer.Permanent(errors.New(hostileReason))
		case strings.Contains(m.Body, `"amount"`):
			return consumer.Permanent(errors.New("amount is negative"))
		}
		return validation{"account unknown"}
	})
}

// consume runs a consumer on the source queue with handler until the
// queue `until` holds want visible messages (the DLQ) or, when until is
// the source, until it is empty; then it stops the consumer.
func (q *queues) consume(t *testing.T, want int, until string, handler consumer.HandlerFunc) {
	t.Helper()
	c, err := consumer.New(consumer.Config{Client: q.client, QueueURL: q.src, Handler: handler, WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		visible, inFlight := testenv.Count(t, q.client, until)
		if (until == q.src && visible+inFlight == 0) || (until != q.src && visible == want) {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("queue %s: %d visible, %d in flight after a minute; want %d", until, visible, inFlight, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("consumer: %v", err)
	}
}

// serve starts a console over q on a local HTTP server; both stop when
// the test ends.
func serve(t *testing.T, q *queues, mod func(*console.Config)) (*console.Console, *httptest.Server, *redrive.Redriver) {
	t.Helper()
	// A short visibility: fauxqs now and then loses a receive's response,
	// whose messages a read then waits for until their visibility ends.
	r, err := redrive.New(redrive.Config{Client: q.client, VisibilityTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := console.Config{Redriver: r, QueuePrefix: q.base, BackupDir: t.TempDir()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		srv.Close()
		_ = c.Close()
	})
	return c, srv, r
}

// TestBrowserRedrive is the console seen by a person, on dead letters a
// real consumer made: the page's counts are redrive's, hostile text is
// only text, a request without the token gets 401 and an action without
// the CSRF token 403, and a filtered redrive clicked through its dry run
// and its confirmation moves exactly the filtered messages back to their
// source, where the consumer then applies each once.
func TestBrowserRedrive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := browser(t)
	q := newQueues(t, testenv.SQS(t), "orders")
	q.deadLetters(t, 6, 4, true)
	c, srv, r := serve(t, q, func(cfg *console.Config) {
		cfg.Outbox = outbox.NewMemory(outbox.MemoryConfig{})
		cfg.Keys = idempotency.NewMemory(idempotency.MemoryConfig{})
		cfg.RefreshInterval = 300 * time.Millisecond
	})
	shots := t.TempDir()

	// What redrive reports: list's count of the DLQ, and the dry run's
	// count by class.
	dlqs, err := r.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := -1
	for _, d := range dlqs {
		if d.Name == q.dlqName {
			listed = d.Messages
		}
	}
	dlq, err := r.Queue(ctx, q.dlqName)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Plan(ctx, dlq, redrive.MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if listed != 11 || plan.ByClass["permanent"] != 7 || plan.ByClass["validation"] != 4 {
		t.Fatalf("redrive reports %d in the DLQ, by class %v; want 11, permanent 7, validation 4", listed, plan.ByClass)
	}

	// Without the token: 401, in the browser and to a plain client. An
	// action with the token but without the CSRF token: 403.
	run(t, b, "open without the token", chromedp.Navigate(srv.URL+"/"))
	if got := eval[string](t, b, `document.body.innerText`); !strings.Contains(got, "401 unauthorized") {
		t.Fatalf("without the token the browser shows %q", got)
	}
	resp, err := http.Get(srv.URL + "/dlq/" + q.dlqName)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET without the token: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/dlq/"+q.dlqName+"/plan", strings.NewReader(url.Values{"f": {"class=validation"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Console-Token", c.Token())
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST without the CSRF token: %d, want 403", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()

	// The overview: the DLQ's depth is list's count.
	run(t, b, "overview", chromedp.Navigate(srv.URL+"/?token="+c.Token()), chromedp.WaitVisible("#queues"))
	if u := eval[string](t, b, `location.href`); strings.Contains(u, "token=") {
		t.Fatalf("the token stayed in the address: %s", u)
	}
	depth := eval[string](t, b, fmt.Sprintf(`document.querySelector('tr[data-queue=%q] td[data-field="messages"]').textContent`, q.dlqName))
	if depth != fmt.Sprint(listed) {
		t.Fatalf("overview shows %s in the DLQ, list %d", depth, listed)
	}
	screenshot(t, b, shots, "console-overview.png")

	// The DLQ page: the grouped counts add up to list's count and match
	// the dry run by class; the hostile reason is text and runs nothing.
	run(t, b, "open the DLQ", chromedp.Click("a.dlq-link"), chromedp.WaitVisible("#groups"))
	byClass := eval[map[string]int](t, b, `(() => { const m = {}; document.querySelectorAll('#groups tr.group').forEach(tr => {
		const c = tr.querySelector('td.class').textContent; m[c] = (m[c] || 0) + parseInt(tr.querySelector('td.count').textContent, 10); }); return m; })()`)
	if byClass["permanent"]+byClass["validation"] != listed || byClass["permanent"] != plan.ByClass["permanent"] || byClass["validation"] != plan.ByClass["validation"] || len(byClass) != 2 {
		t.Fatalf("grouped counts %v; list %d, dry run %v", byClass, listed, plan.ByClass)
	}
	noScript(t, b, hostileReason)
	screenshot(t, b, shots, "console-dlq.png")

	// The hostile message's detail, body shown: text, not markup.
	href := eval[string](t, b, `[...document.querySelectorAll('#messages tr.message')].find(tr => tr.querySelector('td.reason').textContent.includes('<script>')).querySelector('a').href`)
	run(t, b, "open the hostile message", chromedp.Navigate(href+"?body=1"), chromedp.WaitVisible("#body"))
	if got := eval[string](t, b, `document.getElementById('body').textContent`); got != hostileBody {
		t.Fatalf("body shown as %q", got)
	}
	noScript(t, b, hostileBody)

	// A filtered redrive: class=validation, dry run, confirm, follow.
	run(t, b, "filter by class", chromedp.Navigate(srv.URL+"/dlq/"+q.dlqName),
		chromedp.WaitVisible("#filters"), chromedp.SetValue(`#filters select[name="class"]`, "validation"),
		chromedp.Click(`#filters button[type="submit"]`))
	waitFor(t, b, "filter by class", `location.search.includes('class=validation') && document.querySelectorAll('#messages tr.message').length === 4`)
	run(t, b, "dry run", chromedp.Click("#redrive"))
	waitFor(t, b, "dry run", `!!document.getElementById('plan-matched')`)
	if got := eval[string](t, b, `document.getElementById('plan-matched').textContent`); got != "4" {
		t.Fatalf("the dry run would move %s, want 4", got)
	}
	if visible, _ := testenv.Count(t, q.client, q.src); visible != 0 {
		t.Fatalf("the dry run moved %d message(s)", visible)
	}
	run(t, b, "confirm", chromedp.Click("#confirm"))
	waitFor(t, b, "follow the job", `!!document.getElementById('job-state') && document.getElementById('job-state').textContent !== 'running'`)
	if state, moved := eval[string](t, b, `document.getElementById('job-state').textContent`), eval[string](t, b, `document.getElementById('job-moved').textContent`); state != "done" || moved != "4" {
		t.Fatalf("job %s, moved %s; want done, 4 (%s)", state, moved, eval[string](t, b, `document.getElementById('job').innerText`))
	}

	// A selection: one ticked row of the remaining permanent failures.
	run(t, b, "open the remaining permanent failures", chromedp.Navigate(srv.URL+"/dlq/"+q.dlqName+"?reason=amount+is+negative"))
	waitFor(t, b, "six rows", `document.querySelectorAll('#messages tr.message').length === 6`)
	run(t, b, "tick one row", chromedp.Click(`#messages tr.message input.pick`))
	waitFor(t, b, "one ticked", `document.getElementById('selection').textContent.startsWith('1 ticked')`)
	run(t, b, "dry run of the selection", chromedp.Click("#redrive"))
	waitFor(t, b, "dry run of the selection", `!!document.getElementById('plan-matched')`)
	if got := eval[string](t, b, `document.getElementById('plan-matched').textContent`); got != "1" {
		t.Fatalf("the dry run of one ticked row would move %s", got)
	}
	run(t, b, "confirm the selection", chromedp.Click("#confirm"))
	waitFor(t, b, "follow the job", `!!document.getElementById('job-state') && document.getElementById('job-state').textContent === 'done'`)

	// Exactly the four filtered messages and the ticked one went back to
	// the source: the consumer, now healthy, applies each once.
	if visible, inFlight := testenv.Count(t, q.client, q.dlq); visible+inFlight != 6 {
		t.Fatalf("%d message(s) left in the DLQ, want 6", visible+inFlight)
	}
	var mu sync.Mutex
	applied := map[string]int{}
	q.consume(t, 0, q.src, func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		applied[m.Body]++
		mu.Unlock()
		return nil
	})
	negatives := 0
	for body, n := range applied {
		switch {
		case n != 1:
			t.Errorf("%s applied %d times", body, n)
		case strings.Contains(body, `"amount"`):
			negatives++
		}
	}
	for _, body := range q.invalid {
		if applied[body] != 1 {
			t.Errorf("filtered message %s applied %d times, want 1", body, applied[body])
		}
	}
	if len(applied) != 5 || negatives != 1 {
		t.Fatalf("applied %v: want the 4 filtered messages and the ticked one", applied)
	}

	// The overview refreshes itself: a message sent now shows up without
	// a reload, and so does the DLQ's new depth.
	run(t, b, "overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#queues"))
	run(t, b, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	if _, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.src), MessageBody: aws.String("later")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "live refresh", fmt.Sprintf(`window.notReloaded === true && document.querySelector('tr[data-queue=%q] td[data-field="messages"]').textContent === '1' && document.querySelector('tr[data-queue=%q] td[data-field="messages"]').textContent === '6'`, q.base, q.dlqName))
}

// noScript checks that the page shows text as text: it is there, no
// image or script element came from it, and the flag a script would set
// is unset.
func noScript(t *testing.T, b context.Context, text string) {
	t.Helper()
	if got := eval[string](t, b, `typeof window.pwned`); got != "undefined" {
		t.Fatalf("window.pwned is %s: a hostile text ran", got)
	}
	if !eval[bool](t, b, fmt.Sprintf(`document.body.textContent.includes(%q)`, text)) {
		t.Fatalf("%q is not shown as text", text)
	}
	if n := eval[int](t, b, `document.images.length + [...document.scripts].filter(s => !s.src.endsWith('/static/console.js')).length`); n != 0 {
		t.Fatalf("%d image or script element(s) in the page", n)
	}
}

// TestBrowserReadOnly checks that a read-only console shows no action and
// refuses one posted with both tokens.
func TestBrowserReadOnly(t *testing.T) {
	t.Parallel()
	b := browser(t)
	q := newQueues(t, testenv.SQS(t), "readonly")
	q.deadLetters(t, 2, 1, false)
	c, srv, _ := serve(t, q, func(cfg *console.Config) { cfg.ReadOnly = true })
	run(t, b, "open the DLQ", chromedp.Navigate(srv.URL+"/dlq/"+q.dlqName+"?token="+c.Token()), chromedp.WaitVisible("#groups"))
	if n := eval[int](t, b, `document.querySelectorAll('form[method="post"], #act, #redrive, #export, #delete, input.pick, #select-all').length`); n != 0 {
		t.Fatalf("a read-only page shows %d action element(s)", n)
	}
	if rows := eval[int](t, b, `document.querySelectorAll('#messages tr.message').length`); rows != 3 {
		t.Fatalf("%d rows, want 3", rows)
	}
	csrf := eval[string](t, b, `document.querySelector('meta[name="csrf-token"]').content`)
	for _, action := range []string{"plan", "export", "delete"} {
		req, _ := http.NewRequest("POST", srv.URL+"/dlq/"+q.dlqName+"/"+action, strings.NewReader(url.Values{"csrf": {csrf}, "confirm": {q.dlqName}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Console-Token", c.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("read-only POST %s: %d, want 403", action, resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	if visible, inFlight := testenv.Count(t, q.client, q.dlq); visible+inFlight != 3 {
		t.Fatalf("%d in the DLQ after refused actions, want 3", visible+inFlight)
	}
}
