package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/console"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/redrive"
)

// Attacker-written text: a body and a failure reason that would run a
// script if a page put them into its HTML as markup.
const (
	hostileBody   = `<img src=x onerror="window.pwned=1">`
	hostileReason = `<script>window.pwned=1</script>`
)

// fakeDLQ is an in-process SQS (internal/sqsfake) with a source queue
// "orders" and its DLQ "orders-dlq".
type fakeDLQ struct {
	f           *sqsfake.Fake
	src, dlq    string
	srcName     string
	dlqName     string
	other       string // a queue that is no DLQ
	deadLetters map[string]string
}

func newFakeDLQ(t *testing.T) *fakeDLQ {
	t.Helper()
	f := sqsfake.New()
	d := &fakeDLQ{f: f, srcName: "orders", dlqName: "orders-dlq", deadLetters: map[string]string{}}
	d.dlq = f.AddQueue(d.dlqName, nil)
	d.src = f.AddQueue(d.srcName, map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
	d.other = f.AddQueue("payments", nil)
	t.Cleanup(func() {
		if p := f.Problems(); len(p) > 0 {
			t.Errorf("SQS contract violations: %v", p)
		}
	})
	return d
}

// put adds a dead letter as a consumer writes it, and returns its id.
func (d *fakeDLQ) put(t *testing.T, body, class, reason string) string {
	t.Helper()
	f := deadletter.Failure{Error: reason, Class: class, SourceQueue: d.src, Attempts: 1, OriginalMessageID: "orig", FailedAt: time.Now().Add(-time.Minute)}
	b, _ := json.Marshal(f)
	out, err := d.f.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(d.dlq), MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(b))}}})
	if err != nil {
		t.Fatal(err)
	}
	d.deadLetters[aws.ToString(out.MessageId)] = body
	return aws.ToString(out.MessageId)
}

// newConsole returns a console over d, closed when the test ends.
func newConsole(t *testing.T, d *fakeDLQ, mod func(*console.Config)) *console.Console {
	t.Helper()
	r, err := redrive.New(redrive.Config{Client: d.f})
	if err != nil {
		t.Fatal(err)
	}
	cfg := console.Config{Redriver: r, BackupDir: t.TempDir()}
	if mod != nil {
		mod(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// do serves one request with the token header (when token is set) and
// returns the response.
func do(c *console.Console, method, target, token string, form url.Values) *httptest.ResponseRecorder {
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	if token != "" {
		req.Header.Set("X-Console-Token", token)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	return w
}

// csrfOf reads the CSRF token a page embeds in its forms.
func csrfOf(t *testing.T, html string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", html)
	}
	return m[1]
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	r, err := redrive.New(redrive.Config{Client: sqsfake.New()})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]console.Config{
		"no redriver":    {},
		"short token":    {Redriver: r, Token: "abc"},
		"base path":      {Redriver: r, BasePath: "admin/"},
		"no backup dir":  {Redriver: r, BackupDir: filepath.Join(t.TempDir(), "missing")},
		"negative pages": {Redriver: r, PageSize: -1},
	} {
		if _, err := console.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

// TestTokenRequired checks that every request needs the token: 401
// without it or with a wrong one; in the query it sets an HttpOnly,
// SameSite=Strict cookie and redirects to the page without it.
func TestTokenRequired(t *testing.T) {
	t.Parallel()
	d := newFakeDLQ(t)
	c := newConsole(t, d, nil)
	for _, target := range []string{"/", "/dlq/orders-dlq", "/static/console.js", "/api/overview", "/?token=wrong"} {
		if w := do(c, "GET", target, "", nil); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", target, w.Code)
		}
	}
	if w := do(c, "GET", "/", "not-the-token-at-all", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("wrong token header: %d", w.Code)
	}
	w := do(c, "GET", "/dlq/orders-dlq?class=permanent&token="+c.Token(), "", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dlq/orders-dlq?class=permanent" {
		t.Fatalf("token in the query: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	ck := w.Result().Cookies()
	if len(ck) != 1 || ck[0].Value != c.Token() || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v", ck)
	}
	for _, evil := range []string{"//evil.example/", "/\\evil.example/"} {
		w := do(c, "GET", "http://127.0.0.1"+strings.ReplaceAll(evil, "\\", "%5C")+"?token="+c.Token(), "", nil)
		if loc := w.Header().Get("Location"); !strings.HasPrefix(loc, "/evil.example") {
			t.Errorf("GET %s?token=…: redirected to %q, off this host", evil, loc)
		}
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.AddCookie(ck[0])
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("with the cookie: %d", rec.Code)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q allows inline script", csp)
	}
}

// TestCSRFRequired checks that a state-changing request without the CSRF
// token, or from another site, is refused with 403 and changes nothing.
func TestCSRFRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		d.put(t, "a", "permanent", "boom")
		c := newConsole(t, d, nil)
		page := do(c, "GET", "/dlq/orders-dlq", c.Token(), nil)
		csrf := csrfOf(t, page.Body.String())
		for name, form := range map[string]url.Values{
			"none":  {"f": {"class=permanent"}},
			"wrong": {"f": {"class=permanent"}, "csrf": {strings.Repeat("0", len(csrf))}},
		} {
			if w := do(c, "POST", "/dlq/orders-dlq/plan", c.Token(), form); w.Code != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", name, w.Code)
			}
		}
		req := httptest.NewRequest("POST", "/dlq/orders-dlq/plan", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Console-Token", c.Token())
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		if w.Code != http.StatusForbidden {
			t.Errorf("cross-site: %d, want 403", w.Code)
		}
		if w := do(c, "POST", "/dlq/orders-dlq/plan", c.Token(), url.Values{"csrf": {csrf}}); w.Code != http.StatusOK {
			t.Errorf("with the CSRF token: %d\n%s", w.Code, w.Body)
		}
		if n := len(d.f.Sent(d.src)); n != 0 {
			t.Errorf("%d message(s) sent to the source", n)
		}
	})
}

// TestMoveNeedsDryRun checks that a redrive runs only as the confirmation
// of a dry run, once, and moves what the dry run selected.
func TestMoveNeedsDryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		for range 3 {
			d.put(t, "body-secret-p", "permanent", "boom")
		}
		v := d.put(t, "body-secret-v", "validation", "account unknown")
		core, logs := observer.New(zap.InfoLevel)
		c := newConsole(t, d, func(cfg *console.Config) { cfg.Logger = zap.New(core) })
		csrf := csrfOf(t, do(c, "GET", "/dlq/orders-dlq", c.Token(), nil).Body.String())
		if w := do(c, "POST", "/dlq/orders-dlq/move", c.Token(), url.Values{"csrf": {csrf}, "plan": {"nope"}}); w.Code != http.StatusConflict {
			t.Fatalf("move without a dry run: %d", w.Code)
		}
		w := do(c, "POST", "/dlq/orders-dlq/plan", c.Token(), url.Values{"csrf": {csrf}, "f": {"class=validation"}})
		plan := regexp.MustCompile(`name="plan" value="([0-9a-f]+)"`).FindStringSubmatch(w.Body.String())
		if w.Code != http.StatusOK || plan == nil || !strings.Contains(w.Body.String(), `<td id="plan-matched"><b>1</b>`) {
			t.Fatalf("dry run: %d\n%s", w.Code, w.Body)
		}
		if n := len(d.f.Sent(d.src)); n != 0 {
			t.Fatalf("the dry run sent %d message(s)", n)
		}
		w = do(c, "POST", "/dlq/orders-dlq/move", c.Token(), url.Values{"csrf": {csrf}, "plan": {plan[1]}})
		if w.Code != http.StatusSeeOther {
			t.Fatalf("confirm: %d\n%s", w.Code, w.Body)
		}
		if again := do(c, "POST", "/dlq/orders-dlq/move", c.Token(), url.Values{"csrf": {csrf}, "plan": {plan[1]}}); again.Code != http.StatusConflict {
			t.Fatalf("a dry run confirmed twice: %d", again.Code)
		}
		job := waitJob(t, c, w.Header().Get("Location"))
		if job["state"] != "done" || job["moved"] != 1.0 {
			t.Fatalf("job %v", job)
		}
		sent := d.f.Sent(d.src)
		if len(sent) != 1 || sent[0].Body != d.deadLetters[v] {
			t.Fatalf("sent to the source: %+v", sent)
		}
		if n := len(d.f.Messages(d.dlq)); n != 3 {
			t.Fatalf("%d left in the DLQ, want 3", n)
		}
		var actions []string
		for _, e := range logs.All() {
			actions = append(actions, e.ContextMap()["action"].(string))
			if b, _ := json.Marshal(e.ContextMap()); strings.Contains(e.Message+string(b), "body-secret") {
				t.Errorf("a body in the log: %v", e)
			}
		}
		if strings.Join(actions, ",") != "dry-run,redrive,redrive" {
			t.Errorf("logged actions %v", actions)
		}
	})
}

// waitJob follows a job's API until it ends.
func waitJob(t *testing.T, c *console.Console, jobPage string) map[string]any {
	t.Helper()
	api := strings.Replace(jobPage, "/jobs/", "/api/jobs/", 1)
	for {
		w := do(c, "GET", api, c.Token(), nil)
		var j map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &j); err != nil {
			t.Fatalf("job %s: %v: %s", api, err, w.Body)
		}
		if j["state"] != "running" {
			return j
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReadOnly checks that a read-only console shows no action and
// refuses every action endpoint, even with both tokens.
func TestReadOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		d.put(t, "a", "permanent", "boom")
		box := outbox.NewMemory(outbox.MemoryConfig{})
		c := newConsole(t, d, func(cfg *console.Config) {
			cfg.ReadOnly = true
			cfg.Outbox = box
			cfg.Keys = idempotency.NewMemory(idempotency.MemoryConfig{})
		})
		page := do(c, "GET", "/dlq/orders-dlq", c.Token(), nil).Body.String()
		for _, s := range []string{`id="act"`, `id="redrive"`, `id="export"`, `id="delete"`, `class="pick"`} {
			if strings.Contains(page, s) {
				t.Errorf("read-only page holds %s", s)
			}
		}
		if !strings.Contains(page, `id="read-only"`) {
			t.Error("the page does not say it is read-only")
		}
		csrf := csrfOf(t, do(c, "GET", "/keys", c.Token(), nil).Body.String())
		for _, p := range []string{"/dlq/orders-dlq/plan", "/dlq/orders-dlq/move", "/dlq/orders-dlq/export", "/dlq/orders-dlq/delete/confirm", "/dlq/orders-dlq/delete", "/outbox/requeue", "/outbox/discard"} {
			if w := do(c, "POST", p, c.Token(), url.Values{"csrf": {csrf}, "confirm": {"orders-dlq"}}); w.Code != http.StatusForbidden {
				t.Errorf("POST %s: %d, want 403", p, w.Code)
			}
		}
		if w := do(c, "POST", "/keys", c.Token(), url.Values{"csrf": {csrf}, "scope": {"s"}, "key": {"k"}}); w.Code != http.StatusOK {
			t.Errorf("a key lookup (a read) refused: %d", w.Code)
		}
		if n := len(d.f.Messages(d.dlq)); n != 1 {
			t.Errorf("%d in the DLQ", n)
		}
	})
}

// TestHostileTextIsEscaped checks that a body, a reason, an attribute and
// a class a producer wrote reach the HTML only as text.
func TestHostileTextIsEscaped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		id := d.put(t, hostileBody, "permanent", hostileReason+"\u202e")
		d.put(t, "{}", `"><svg onload=alert(1)>`, hostileReason)
		c := newConsole(t, d, nil)
		for _, target := range []string{"/dlq/orders-dlq", "/dlq/orders-dlq/message/" + id + "?body=1"} {
			w := do(c, "GET", target, c.Token(), nil)
			if w.Code != http.StatusOK {
				t.Fatalf("%s: %d\n%s", target, w.Code, w.Body)
			}
			body := w.Body.String()
			for _, raw := range []string{"<script>window", "<img", "<svg", "\u202e"} {
				if strings.Contains(body, raw) {
					t.Errorf("%s: raw %q in the page", target, raw)
				}
			}
			if !strings.Contains(body, "&lt;script&gt;window.pwned=1&lt;/script&gt;") {
				t.Errorf("%s: the reason is not shown as text", target)
			}
			if strings.Contains(target, "body=1") && !strings.Contains(body, "&lt;img src=x onerror=&#34;window.pwned=1&#34;&gt;") {
				t.Errorf("%s: the body is not shown as text", target)
			}
			scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1)
			if len(scripts) != 1 || scripts[0] != `<script src="/static/console.js" defer>` {
				t.Errorf("%s: scripts %q", target, scripts)
			}
		}
	})
}

// TestNotADLQIsNotRead checks that the console never reads a queue that
// is no DLQ (its consumers would miss what a read takes in flight), nor a
// DLQ outside its prefix.
func TestNotADLQIsNotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		d.f.Put(d.src, "live", "")
		c := newConsole(t, d, nil)
		if w := do(c, "GET", "/dlq/orders", c.Token(), nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not a dead-letter queue") {
			t.Fatalf("source queue page: %d\n%s", w.Code, w.Body)
		}
		if n := d.f.Calls("ReceiveMessage"); n != 0 {
			t.Fatalf("%d receive(s) on a queue that is no DLQ", n)
		}
		other := newConsole(t, d, func(cfg *console.Config) { cfg.QueuePrefix = "payments" })
		if w := do(other, "GET", "/dlq/orders-dlq", other.Token(), nil); w.Code != http.StatusNotFound {
			t.Fatalf("DLQ outside the prefix: %d", w.Code)
		}
	})
}

// TestOverview checks the overview's rows and its refresh API.
func TestOverview(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		d.put(t, "a", "permanent", "boom")
		d.put(t, "b", "permanent", "boom")
		d.f.Put(d.src, "live", "")
		c := newConsole(t, d, func(cfg *console.Config) { cfg.QueuePrefix = "orders" })
		w := do(c, "GET", "/api/overview", c.Token(), nil)
		var got struct {
			Queues []map[string]any `json:"queues"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Queues) != 2 {
			t.Fatalf("queues %v", got.Queues)
		}
		dlq, src := got.Queues[1], got.Queues[0]
		if src["name"] != "orders" || src["messages"] != 1.0 || src["dlq"] != "orders-dlq" || src["dlq_depth"] != 2.0 || src["is_dlq"] != false || src["oldest"] != "n/a" {
			t.Errorf("source row %v", src)
		}
		if dlq["name"] != "orders-dlq" || dlq["messages"] != 2.0 || dlq["is_dlq"] != true || dlq["oldest"] == "-" {
			t.Errorf("DLQ row %v", dlq)
		}
		for _, m := range d.f.Messages(d.src) {
			if m.ReceiveCount != 0 {
				t.Errorf("the overview received from the source queue: %+v", m)
			}
		}
	})
}

// TestGroupsAndFilters checks the DLQ page's groups and its filters,
// which are redrive's.
func TestGroupsAndFilters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		for range 3 {
			d.put(t, `{"tenant":"acme"}`, "permanent", "amount is negative")
		}
		d.put(t, `{"tenant":"zeta"}`, "permanent", "amount is negative")
		d.put(t, "x", "validation", "account unknown")
		c := newConsole(t, d, nil)
		page := do(c, "GET", "/dlq/orders-dlq", c.Token(), nil).Body.String()
		counts := regexp.MustCompile(`<td class="n count">(\d+)</td>`).FindAllStringSubmatch(page, -1)
		if len(counts) != 2 || counts[0][1] != "4" || counts[1][1] != "1" {
			t.Fatalf("group counts %v", counts)
		}
		rows := func(q string) int {
			return strings.Count(do(c, "GET", "/dlq/orders-dlq?"+q, c.Token(), nil).Body.String(), `<tr class="message"`)
		}
		for q, want := range map[string]int{
			"":                                      5,
			"class=permanent":                       4,
			"class=permanent&expr=json:tenant=acme": 3,
			"reason=account+unknown":                1,
			"source=orders":                         5,
			"older=1h":                              0,
			"newer=1h":                              5,
		} {
			if got := rows(q); got != want {
				t.Errorf("?%s: %d rows, want %d", q, got, want)
			}
		}
		if w := do(c, "GET", "/dlq/orders-dlq?expr=colour=red", c.Token(), nil); !strings.Contains(w.Body.String(), `id="filter-error"`) {
			t.Error("a bad filter is not reported")
		}
		if n := d.f.Calls("ReceiveMessage"); n > 4 {
			t.Errorf("%d receives: the filters should use the page's read", n)
		}
	})
}

// TestDeleteWritesBackupFirst checks that a delete needs the DLQ's name
// typed, writes each deleted message to the backup file, and deletes only
// the selection.
func TestDeleteWritesBackupFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		gone := d.put(t, "gone", "permanent", "boom")
		d.put(t, "stays", "permanent", "boom")
		dir := t.TempDir()
		c := newConsole(t, d, func(cfg *console.Config) { cfg.BackupDir = dir })
		csrf := csrfOf(t, do(c, "GET", "/dlq/orders-dlq", c.Token(), nil).Body.String())
		confirm := do(c, "POST", "/dlq/orders-dlq/delete/confirm", c.Token(), url.Values{"csrf": {csrf}, "id": {gone}})
		if confirm.Code != http.StatusOK || !strings.Contains(confirm.Body.String(), "1 message(s) in the last read") {
			t.Fatalf("confirm page: %d\n%s", confirm.Code, confirm.Body)
		}
		if w := do(c, "POST", "/dlq/orders-dlq/delete", c.Token(), url.Values{"csrf": {csrf}, "id": {gone}, "confirm": {"orders"}}); w.Code != http.StatusBadRequest {
			t.Fatalf("wrong name typed: %d", w.Code)
		}
		w := do(c, "POST", "/dlq/orders-dlq/delete", c.Token(), url.Values{"csrf": {csrf}, "id": {gone}, "confirm": {"orders-dlq"}})
		if w.Code != http.StatusSeeOther {
			t.Fatalf("delete: %d\n%s", w.Code, w.Body)
		}
		job := waitJob(t, c, w.Header().Get("Location"))
		if job["state"] != "done" || job["moved"] != 1.0 {
			t.Fatalf("job %v", job)
		}
		left := d.f.Messages(d.dlq)
		if len(left) != 1 || left[0].Body != "stays" {
			t.Fatalf("left in the DLQ: %+v", left)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "orders-dlq-deleted-*.jsonl"))
		if len(files) != 1 || job["backup"] != files[0] {
			t.Fatalf("backup files %v, job says %v", files, job["backup"])
		}
		f, err := os.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		var recs []redrive.Record
		for sc.Scan() {
			var r redrive.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		if len(recs) != 1 || recs[0].Body != "gone" || recs[0].MessageID != gone {
			t.Fatalf("backup holds %+v", recs)
		}
	})
}

// TestExport checks that an export streams the selection as JSON lines
// and leaves the DLQ as it was.
func TestExport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDLQ(t)
		d.put(t, "p1", "permanent", "boom")
		d.put(t, "v1", "validation", "bad")
		c := newConsole(t, d, nil)
		csrf := csrfOf(t, do(c, "GET", "/dlq/orders-dlq", c.Token(), nil).Body.String())
		w := do(c, "POST", "/dlq/orders-dlq/export", c.Token(), url.Values{"csrf": {csrf}, "f": {"class=validation"}})
		if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Disposition"), "attachment") {
			t.Fatalf("export: %d %v", w.Code, w.Header())
		}
		lines := strings.Split(strings.TrimSpace(w.Body.String()), "\n")
		var rec redrive.Record
		if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec.Body != "v1" {
			t.Fatalf("export body %q", w.Body)
		}
		if n := len(d.f.Messages(d.dlq)); n != 2 {
			t.Fatalf("%d in the DLQ after an export", n)
		}
	})
}

// TestOutboxAndKeys checks the outbox page's requeue and discard and the
// key lookup, on the memory stores.
func TestOutboxAndKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	box := outbox.NewMemory(outbox.MemoryConfig{})
	if err := box.Put(ctx, outbox.Event{Entity: "acct-1", Payload: hostileBody}, outbox.Event{Entity: "acct-2", Payload: "b"}, outbox.Event{Entity: "acct-3", Payload: "c"}); err != nil {
		t.Fatal(err)
	}
	evs, err := box.Due(ctx, "relay", 10)
	if err != nil || len(evs) != 3 {
		t.Fatalf("due %v %v", evs, err)
	}
	for _, ev := range evs[:2] {
		ev.Attempts = 5
		if err := box.Failed(ctx, ev, hostileReason, time.Time{}, true); err != nil {
			t.Fatal(err)
		}
	}
	keys := idempotency.NewMemory(idempotency.MemoryConfig{})
	cl, err := keys.Claim(ctx, idempotency.RecordKey("caller-1", "k-1"), "fp-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Complete(ctx, idempotency.RecordKey("caller-1", "k-1"), cl.Token, idempotency.Completion{Response: idempotency.Response{Status: 201, Body: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	c := newConsole(t, newFakeDLQ(t), func(cfg *console.Config) { cfg.Outbox, cfg.Keys = box, keys })
	page := do(c, "GET", "/outbox", c.Token(), nil).Body.String()
	if !strings.Contains(page, `<td id="outbox-dead">2</td>`) || !strings.Contains(page, `<td id="outbox-pending">1</td>`) || strings.Contains(page, "<script>window") || strings.Contains(page, "<img") {
		t.Fatalf("outbox page:\n%s", page)
	}
	csrf := csrfOf(t, page)
	dead := evs[0]
	if w := do(c, "POST", "/outbox/discard", c.Token(), url.Values{"csrf": {csrf}, "event": {dead.ID}}); w.Code != http.StatusBadRequest {
		t.Fatalf("discard without the typed word: %d", w.Code)
	}
	if w := do(c, "POST", "/outbox/discard", c.Token(), url.Values{"csrf": {csrf}, "event": {dead.ID}, "confirm": {"discard"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("discard: %d\n%s", w.Code, w.Body)
	}
	if w := do(c, "POST", "/outbox/requeue", c.Token(), url.Values{"csrf": {csrf}}); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/outbox?done=requeued&n=1" {
		t.Fatalf("requeue: %d %q", w.Code, w.Header().Get("Location"))
	}
	st, err := box.Stats(ctx)
	if err != nil || st.Dead != 0 || st.Pending != 2 {
		t.Fatalf("stats after discard and requeue: %+v %v", st, err)
	}
	w := do(c, "POST", "/keys", c.Token(), url.Values{"csrf": {csrf}, "scope": {"caller-1"}, "key": {"k-1"}})
	if !strings.Contains(w.Body.String(), `<td id="key-state">COMPLETED</td>`) || !strings.Contains(w.Body.String(), `<td id="key-status">201`) {
		t.Fatalf("key lookup:\n%s", w.Body)
	}
	w = do(c, "POST", "/keys", c.Token(), url.Values{"csrf": {csrf}, "scope": {"caller-2"}, "key": {"k-1"}})
	if !strings.Contains(w.Body.String(), `id="key-none"`) {
		t.Fatalf("another caller's key was found:\n%s", w.Body)
	}
	if _, err := keys.Lookup(ctx, idempotency.RecordKey("caller-2", "k-1")); !errors.Is(err, idempotency.ErrNoRecord) {
		t.Fatalf("the lookup claimed the key: %v", err)
	}
}
