package console

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/printable"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/redrive"
)

// Config configures a [Console]. Only Redriver is required.
type Config struct {
	// Redriver reads, moves, exports and deletes dead letters; every rule
	// of a move (only to a source of the DLQ that SQS or a signed record
	// attests, FIFO order, send before delete) is its own. Its
	// VisibilityTimeout is the longest a message the console read stays
	// hidden should the console stop mid-read. Required.
	Redriver *redrive.Redriver
	// Token is the secret every request must carry: once in the query
	// (?token=…, which sets an HttpOnly, SameSite=Strict cookie and
	// redirects to the same page without it), or in the cookie, or in the
	// X-Console-Token header. A request without it gets 401. At least 16
	// bytes. Defaults to 32 random bytes, hex-encoded (see
	// [Console.Token]).
	Token string
	// ReadOnly removes every action (redrive, export, delete, requeue,
	// discard) from the pages, and the server refuses their endpoints
	// with 403. Defaults to false.
	ReadOnly bool
	// QueuePrefix limits the console to the queues whose names start with
	// it, and to the DLQs of those queues. Defaults to "": every queue the
	// Redriver's client may list.
	QueuePrefix string
	// PageSize is the most dead letters a DLQ page reads (and holds in
	// memory, bodies included, while its view is fresh). Defaults to 1000.
	PageSize int
	// BackupDir is where a delete writes the messages it deletes, one
	// JSON-lines file per delete, synced before anything is deleted:
	// `sqs-redrive import FILE QUEUE` puts them back. Defaults to "": the
	// console offers no delete.
	BackupDir string
	// Outbox, when set, adds the outbox page: pending, oldest and dead
	// events, requeue and discard. Defaults to nil: no outbox page.
	Outbox outbox.Store
	// Keys, when set, adds the idempotency-key page: a caller's key looked
	// up without claiming it. Defaults to nil: no key page.
	Keys idempotency.Lookuper
	// BasePath is the path the console is served under, for its links and
	// its cookie; strip it before the console (http.StripPrefix).
	// Defaults to "": the root.
	BasePath string
	// RefreshInterval is how often the overview refreshes itself in the
	// browser. Defaults to 5s.
	RefreshInterval time.Duration
	// WhoFunc names the person behind a request in the log of actions (a
	// header your authenticating proxy sets, say). Defaults to the
	// request's remote address.
	WhoFunc func(*http.Request) string
	// Logger receives one info line per action (who, action, queue,
	// count; never a body) and warnings. Defaults to zap.NewNop().
	Logger *zap.Logger
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Console is the web console: an [http.Handler]. Close it to stop the
// actions it runs.
type Console struct {
	cfg  Config
	r    *redrive.Redriver
	log  *zap.Logger
	now  func() time.Time
	csrf string
	mux  *http.ServeMux
	tpl  *templates

	ctx    context.Context // cancelled by Close: ends running jobs
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	queues map[string]*dlqState // by DLQ name
	jobs   map[string]*job
	order  []string // job ids, oldest first
	plans  map[string]*plan
	ov     *overviewCache
}

// New returns a Console, filling Config's zero values with their
// defaults; a wrong value is an error that says what to set.
func New(cfg Config) (*Console, error) {
	if cfg.Redriver == nil {
		return nil, errors.New("console: Config.Redriver is required")
	}
	if cfg.Token == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("console: token: %w", err)
		}
		cfg.Token = hex.EncodeToString(b)
	}
	if len(cfg.Token) < 16 {
		return nil, errors.New("console: Config.Token must be at least 16 bytes (leave it empty for a random one)")
	}
	if cfg.PageSize < 0 || cfg.RefreshInterval < 0 {
		return nil, errors.New("console: Config.PageSize and Config.RefreshInterval must not be negative")
	}
	if cfg.BasePath != "" && (!strings.HasPrefix(cfg.BasePath, "/") || strings.HasSuffix(cfg.BasePath, "/")) {
		return nil, fmt.Errorf("console: Config.BasePath %q must start with / and not end with one (e.g. /console)", cfg.BasePath)
	}
	if cfg.BackupDir != "" {
		st, err := os.Stat(cfg.BackupDir)
		if err != nil || !st.IsDir() {
			return nil, fmt.Errorf("console: Config.BackupDir %s is not a directory: create it, or leave BackupDir empty to offer no delete", cfg.BackupDir)
		}
	}
	cfg.PageSize = cmp.Or(cfg.PageSize, 1000)
	cfg.RefreshInterval = cmp.Or(cfg.RefreshInterval, 5*time.Second)
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.WhoFunc == nil {
		cfg.WhoFunc = func(r *http.Request) string { return r.RemoteAddr }
	}
	tpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	mac := hmac.New(sha256.New, []byte(cfg.Token))
	mac.Write([]byte("sqsonce-console-csrf"))
	c := &Console{
		cfg: cfg, r: cfg.Redriver, log: cmp.Or(cfg.Logger, zap.NewNop()), now: cfg.NowFunc,
		csrf: hex.EncodeToString(mac.Sum(nil)), tpl: tpl, ctx: ctx, cancel: cancel,
		queues: map[string]*dlqState{}, jobs: map[string]*job{}, plans: map[string]*plan{}, ov: &overviewCache{},
	}
	c.routes()
	return c, nil
}

// Token returns the token every request must carry (see [Config.Token]).
func (c *Console) Token() string { return c.cfg.Token }

// Close cancels the actions still running (a move stops between batches
// and hands back what it holds) and waits for them to end.
func (c *Console) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// routes registers every page. Actions are behind c.action, which refuses
// them in read-only mode; every POST is behind the CSRF check (see
// ServeHTTP).
func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.overviewPage)
	m.HandleFunc("GET /api/overview", c.overviewAPI)
	m.HandleFunc("GET /dlq/{queue}", c.dlqPage)
	m.HandleFunc("GET /dlq/{queue}/message/{id}", c.messagePage)
	m.HandleFunc("POST /dlq/{queue}/plan", c.action(c.planAction))
	m.HandleFunc("POST /dlq/{queue}/move", c.action(c.moveAction))
	m.HandleFunc("POST /dlq/{queue}/export", c.action(c.exportAction))
	m.HandleFunc("POST /dlq/{queue}/delete/confirm", c.action(c.deleteConfirmAction))
	m.HandleFunc("POST /dlq/{queue}/delete", c.action(c.deleteAction))
	m.HandleFunc("GET /jobs/{id}", c.jobPage)
	m.HandleFunc("GET /api/jobs/{id}", c.jobAPI)
	m.HandleFunc("GET /outbox", c.outboxPage)
	m.HandleFunc("POST /outbox/requeue", c.action(c.requeueAction))
	m.HandleFunc("POST /outbox/discard", c.action(c.discardAction))
	m.HandleFunc("GET /keys", c.keysPage)
	m.HandleFunc("POST /keys", c.keysPage) // a lookup reads only: allowed when read-only
	m.Handle("GET /static/", http.StripPrefix("/static/", staticHandler()))
	c.mux = m
}

// contentSecurityPolicy allows the console's own script and style files
// and nothing else: no inline script, no plug-ins, no framing, no form
// posted elsewhere.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// ServeHTTP serves the console: security headers on every response, the
// token on every request (401 without it), the CSRF token on every POST
// (403 without it).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !c.authenticated(w, r) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if !c.csrfOK(r) {
			c.log.Warn("console: refused a request without a valid CSRF token", zap.String("who", printable.Escape(c.cfg.WhoFunc(r))), zap.String("path", printable.Escape(r.URL.Path)))
			http.Error(w, "403 forbidden: this request carries no valid CSRF token (reload the page and try again)", http.StatusForbidden)
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// action wraps an action's handler: refused when the console is
// read-only.
func (c *Console) action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.ReadOnly {
			http.Error(w, "403 forbidden: the console is read-only", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// audit logs who did what: the action, the queue and a count, never a
// body.
func (c *Console) audit(r *http.Request, action, queue string, count int, fields ...zap.Field) {
	fs := append([]zap.Field{
		zap.String("who", printable.Escape(c.cfg.WhoFunc(r))),
		zap.String("action", action),
		zap.String("queue", printable.Escape(queue)),
		zap.Int("count", count),
	}, fields...)
	c.log.Info("console: "+action, fs...)
}

// newID returns a random id for a job or a plan.
func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// link returns the path p under the console's base path.
func (c *Console) link(p string) string { return c.cfg.BasePath + p }
