package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/steprec"
	"github.com/sqsonce/sqsonce/internal/telemetry"
	"github.com/sqsonce/sqsonce/step"
)

// Header names.
const (
	// HeaderKey is the request header carrying the key.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a replayed response.
	HeaderReplayed = "Idempotent-Replayed"
)

// DefaultReplayHeaders are the response headers stored and replayed when
// Config.ReplayHeaders is empty: those that describe the stored body,
// those that point at what the request made (Location, Link), and the
// rate-limit headers (the IETF RateLimit fields, the common
// X-RateLimit-* ones) as the original request saw them. Retry-After is
// not among them: a replay is the key's final answer, and retrying it
// only replays it again.
var DefaultReplayHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
	"Location", "ETag", "Last-Modified", "Cache-Control", "Link",
	"RateLimit", "RateLimit-*", "X-RateLimit-*",
}

// Config configures the middleware ([New]).
type Config struct {
	// Store keeps the records. Required.
	Store Store
	// ScopeFunc names the caller (an API key id, a user id): keys are
	// scoped to it, so one caller can never replay another's response. An
	// error answers 401 and runs nothing. Required; return a constant only
	// if every client deliberately shares one key space.
	ScopeFunc func(*http.Request) (string, error)
	// Methods are the methods that take a key; others pass through
	// untouched. Defaults to POST and PATCH.
	Methods []string
	// KeyOptional lets requests without a key pass through untouched.
	// Defaults to false: a missing key answers 400.
	KeyOptional bool
	// Lease is how long a running request holds its key; the middleware
	// extends it every Lease/3 while the handler runs. After a crash the
	// key can run again once the lease ends: until then retries get 409
	// with Retry-After, so clients need retries that outlast it (see the
	// package doc, Retries against a lease). A shorter lease frees a
	// crashed request's key sooner, but costs more extensions and loses
	// the key when one cannot be made in time. Defaults to 30 seconds. The
	// transactional mode (BeginTxFunc) has no lease: the request's
	// transaction holds the key.
	Lease time.Duration
	// MaxBodyBytes caps the request body; larger bodies answer 413.
	// Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxResponseBytes caps the stored response (body plus allow-listed
	// headers). A larger response is delivered but not retained: the
	// record is completed with its status and headers only, and a retry
	// gets that status with a problem (TypeNotRetained) instead of the
	// body; the request never runs again. Counted as OutcomeNotStored.
	// Defaults to 256 KiB, under DynamoDB's 400 KB item limit.
	MaxResponseBytes int
	// ReplayHeaders are the response headers stored and replayed: names,
	// or name prefixes ending in "*" ("X-RateLimit-*"), case-insensitive.
	// Set-Cookie is never stored: an entry naming it or a pattern matching
	// it is an error at New. Defaults to [DefaultReplayHeaders].
	ReplayHeaders []string
	// FingerprintHeaders are request headers added to the fingerprint
	// (method, path, raw query and body). Defaults to none.
	FingerprintHeaders []string
	// FingerprintFunc, when set, says what stands for the body in the
	// fingerprint: the same key with a result that differs is another
	// request (422). The method, path, raw query and FingerprintHeaders
	// are compared as always. It gets the request (whose body it must not
	// read or change) and the body as read. An error answers 400
	// [TypeBodyInvalid] with its text, before any claim: nothing runs and
	// the key stays free. [CanonicalJSONFingerprint] forgives the order of
	// object keys and whitespace in a JSON body. Defaults to nil: the body
	// is compared byte for byte, so the same JSON with its keys in another
	// order is another request.
	FingerprintFunc func(r *http.Request, body []byte) (string, error)
	// ReleaseServerErrors releases the key after a 5xx response instead of
	// storing it, so a retry runs the handler again. Defaults to false:
	// a 5xx is stored and replayed like any response (Stripe's rule),
	// except one the middleware caused by cancelling the handler when its
	// lease was lost ([ErrLeaseLost]), which is never stored. In the
	// transactional mode (BeginTxFunc) a 5xx always rolls back and
	// releases. A 429 is never stored: it says the request did not run.
	ReleaseServerErrors bool
	// SettleTimeout bounds each store call: the claim, each lease
	// extension, and the completion or release after the handler returns
	// (made even when the client has gone). Defaults to 10 seconds.
	SettleTimeout time.Duration
	// BeginTxFunc, when set, runs each keyed request in a transaction it
	// opens (the transactional mode; idempg.Store.BeginTx is one). The
	// transaction claims the key ([Tx.Claim]) before the handler runs and
	// holds it until it ends, so nothing keeps a lease: a retry meanwhile
	// gets 409 at once, and a request whose connection or process dies
	// frees its key as its transaction ends. The store's Claim, Extend and
	// Release are not used. The handler reaches the transaction through
	// its request's context ([TxFromContext], unwrapped by the store's
	// package, e.g. idempg.TxFromContext) and does its work in it. When
	// the handler returns, the middleware stores the response in the same
	// transaction ([Tx.Complete]) and commits; only then is the response
	// sent. A panic or runtime.Goexit, [Release], a 5xx (whatever
	// ReleaseServerErrors says), a 429, a response too large to store and
	// a failed commit roll it back, which frees the key: nothing of the
	// request is left, and a retry runs the handler again. A commit the
	// store refuses for good (its error wraps [ErrPermanent]) answers 500
	// TypeCommitRefused without Retry-After; a commit whose outcome is
	// unknown (the connection broke after it was sent) answers 503
	// TypeOutcomeUnknown: the retry replays the response if it committed,
	// and runs the handler if not. A failed begin or claim answers 503 and
	// runs nothing.
	// [Attach] is not available in this mode. Defaults to nil: the
	// handler's own effects and the stored response are separate writes.
	BeginTxFunc func(ctx context.Context) (Tx, error)
	// ObserveFunc, when set, is called once per request that takes a key,
	// with its outcome. Defaults to nil.
	ObserveFunc func(Event)
	// ObserveStepFunc, when set, is called with every step event of the
	// requests (package step: unknown outcomes, reconciles, parked
	// steps). Defaults to nil.
	ObserveStepFunc func(step.Event)
	// MeterProvider, when set, counts every request that takes a key in
	// sqsonce.idempotency.requests, by outcome, and every step event in
	// sqsonce.idempotency.steps, by event (see docs/observability.md).
	// Defaults to nil: nothing is measured.
	MeterProvider metric.MeterProvider
	// Logger receives lost leases, store failures and responses too large
	// to store. Keys and scopes are never logged. Defaults to zap.NewNop().
	Logger *zap.Logger
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Outcome is what happened to one request that took a key.
type Outcome int

const (
	// OutcomeRejected: 400, 401 or 413 before any claim.
	OutcomeRejected Outcome = iota
	// OutcomeExecuted: the handler ran and its response was stored.
	OutcomeExecuted
	// OutcomeReplayed: the stored response was replayed.
	OutcomeReplayed
	// OutcomeInProgress: 409, the key is running elsewhere.
	OutcomeInProgress
	// OutcomeKeyReused: 422, the key belongs to another request.
	OutcomeKeyReused
	// OutcomeReleased: the handler ran and the key was released (Release,
	// a panic or runtime.Goexit, a 429, or a 5xx with ReleaseServerErrors).
	OutcomeReleased
	// OutcomeNotStored: the response could not be stored. Without work
	// the record was completed without it (a retry learns its status, not
	// its body); with work or in the transactional mode nothing was
	// committed and the key was freed.
	OutcomeNotStored
	// OutcomeLeaseLost: the lease was taken over before completion, or
	// could not be extended and the handler, cancelled, answered 5xx
	// (the key was then released).
	OutcomeLeaseLost
	// OutcomeStoreError: the store failed to claim or complete.
	OutcomeStoreError
	// OutcomeCommitFailed: the transactional completion failed (nothing
	// was committed) or its outcome is unknown.
	OutcomeCommitFailed
	// OutcomeStepUnknown: a step of the request (package step) has an
	// outcome that is unknown: 503 TypeStepOutcomeUnknown, the key
	// released with its steps kept, so that a retry resumes.
	OutcomeStepUnknown
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"rejected", "executed", "replayed", "in_progress", "key_reused",
	"released", "not_stored", "lease_lost", "store_error", "commit_failed", "step_unknown"}

// String returns the outcome as logged.
func (o Outcome) String() string {
	if o < 0 || o >= numOutcomes {
		return "unknown"
	}
	return outcomeNames[o]
}

// Event is passed to Config.ObserveFunc.
type Event struct {
	Outcome Outcome
	// Status is the status sent to the client.
	Status int
}

// ErrLeaseLost is the cause of a handler's context being cancelled when its
// lease was taken over or could not be extended before it ended.
var ErrLeaseLost = errors.New("idempotency: lease lost")

// ErrNoKey is returned by [Attach] outside a request that holds a key.
var ErrNoKey = errors.New("idempotency: no idempotency key is held by this request")

// ErrResponseStarted is returned by [Attach] once the response has been
// streamed to the client (it was too large to store), so the work could
// no longer commit with it.
var ErrResponseStarted = errors.New("idempotency: the response was already sent uncommitted (too large to store)")

// Middleware is the Idempotency-Key middleware; [Middleware.Wrap] is its
// func(http.Handler) http.Handler.
type Middleware struct {
	cfg     Config
	methods map[string]bool
	replay  headerSet
	fphdrs  []string
	counts  [numOutcomes]atomic.Int64
	metric  *telemetry.Results
	steps   *telemetry.Results
}

// New returns the middleware, or an error naming the bad field.
func New(cfg Config) (*Middleware, error) {
	if cfg.Store == nil {
		return nil, errors.New("idempotency: Config.Store is required")
	}
	if cfg.ScopeFunc == nil {
		return nil, errors.New("idempotency: Config.ScopeFunc is required: keys are scoped to the caller")
	}
	if cfg.Lease < 0 || cfg.MaxBodyBytes < 0 || cfg.MaxResponseBytes < 0 || cfg.SettleTimeout < 0 {
		return nil, errors.New("idempotency: Config.Lease, MaxBodyBytes, MaxResponseBytes and SettleTimeout must not be negative")
	}
	cfg.Lease = cmp.Or(cfg.Lease, 30*time.Second)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 1<<20)
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, 256<<10)
	cfg.SettleTimeout = cmp.Or(cfg.SettleTimeout, 10*time.Second)
	if len(cfg.Methods) == 0 {
		cfg.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if len(cfg.ReplayHeaders) == 0 {
		cfg.ReplayHeaders = DefaultReplayHeaders
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	m := &Middleware{cfg: cfg, methods: map[string]bool{}}
	m.metric = telemetry.NewResults(cfg.MeterProvider, "sqsonce.idempotency.requests",
		"Requests that took an Idempotency-Key, by outcome.", "{request}", "outcome", outcomeNames[:]...)
	m.steps = telemetry.NewResults(cfg.MeterProvider, "sqsonce.idempotency.steps",
		"Step events of requests (package step), by event.", "{event}", "event", step.EventKinds...)
	for _, meth := range cfg.Methods {
		m.methods[meth] = true
	}
	var err error
	if m.replay, err = newHeaderSet(cfg.ReplayHeaders); err != nil {
		return nil, err
	}
	for _, h := range cfg.FingerprintHeaders {
		m.fphdrs = append(m.fphdrs, http.CanonicalHeaderKey(h))
	}
	return m, nil
}

// Count returns how many requests ended with outcome o.
func (m *Middleware) Count(o Outcome) int64 {
	if o < 0 || o >= numOutcomes {
		return 0
	}
	return m.counts[o].Load()
}

func (m *Middleware) observe(o Outcome, status int) {
	m.counts[o].Add(1)
	m.metric.Add(context.Background(), o.String(), 1)
	if m.cfg.ObserveFunc != nil {
		m.cfg.ObserveFunc(Event{Outcome: o, Status: status})
	}
}

// Wrap returns next behind the middleware. For each request whose method
// takes a key:
//
//   - A ScopeFunc error → 401, no key → 400 (unless KeyOptional), a
//     malformed key → 400, a body over MaxBodyBytes → 413.
//   - The (scope, key) record is claimed with the request's fingerprint.
//     Another request's fingerprint → 422; running elsewhere → 409 with
//     Retry-After; completed → the stored response, replayed with
//     Idempotent-Replayed: true.
//   - Claimed: next runs with its lease extended; its response is
//     buffered, stored with the completed record (with the work attached
//     with [Attach], in one transaction), then sent. Its context is not
//     cancelled when the client hangs up (the retry a dropped connection
//     brings then gets the stored response), only when the lease is lost
//     (cause [ErrLeaseLost]).
//   - [Release], a panic, runtime.Goexit, a 429, or a 5xx answered after
//     the middleware cancelled the handler for a lost lease release the
//     key instead, so a retry runs again.
//   - A response that cannot be stored (over MaxResponseBytes, too large
//     for the store, or its completion failed) is delivered, and the
//     record completed without it: a retry gets its status, its headers
//     that do not describe the body, Idempotent-Replayed: true and a
//     TypeNotRetained problem, and the request never runs twice. (With
//     work attached with [Attach], or in the transactional mode, nothing
//     is committed instead: 500 TypeResponseTooLarge, and a retry runs.)
//   - In the transactional mode (Config.BeginTxFunc) the request's
//     transaction claims and holds the key instead of a lease, and its
//     rollback frees it.
//   - In the lease mode, with a store that records steps ([StepStore]:
//     every store of sqsonce), the handler's context carries a step
//     recorder (package step). A request whose lease was taken over after
//     its owner died, or that is retried, resumes after its last
//     completed step. When a step's outcome is unknown in this attempt,
//     the handler's response is not sent nor stored: the key is released
//     with its steps kept and the client gets 503
//     [TypeStepOutcomeUnknown] (with Retry-After unless the step is
//     parked, which waits for a person); a retry reconciles, reruns or
//     parks the step as its policy says. Never a replay of something that
//     did not happen.
//
// Errors are application/problem+json (RFC 9457), with the Type* types.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	if !m.methods[r.Method] {
		h.next.ServeHTTP(w, r)
		return
	}
	raw := r.Header.Values(HeaderKey)
	if len(raw) == 0 && m.cfg.KeyOptional {
		h.next.ServeHTTP(w, r)
		return
	}
	// The caller first: an unauthenticated request is refused as such,
	// key or not.
	scope, err := m.cfg.ScopeFunc(r)
	if err != nil {
		m.reject(w, http.StatusUnauthorized, TypeScope, "the caller could not be identified")
		return
	}
	if len(raw) == 0 {
		m.reject(w, http.StatusBadRequest, TypeKeyMissing, "this request needs an Idempotency-Key header")
		return
	}
	if len(raw) > 1 {
		m.reject(w, http.StatusBadRequest, TypeKeyInvalid, "the Idempotency-Key header appears more than once")
		return
	}
	key, ok := ParseKey(raw[0])
	if !ok {
		m.reject(w, http.StatusBadRequest, TypeKeyInvalid, `an Idempotency-Key is 1 to 255 ASCII characters: visible ones bare, or printable ones (spaces too) in double quotes with \" and \\ escapes`)
		return
	}
	if r.ContentLength > m.cfg.MaxBodyBytes {
		m.reject(w, http.StatusRequestEntityTooLarge, TypeBodyTooLarge, fmt.Sprintf("the body is over %d bytes", m.cfg.MaxBodyBytes))
		return
	}
	var body []byte
	if r.Body != nil {
		body, err = io.ReadAll(io.LimitReader(r.Body, m.cfg.MaxBodyBytes+1))
		if err != nil {
			m.reject(w, http.StatusBadRequest, TypeBodyUnreadable, "the body could not be read")
			return
		}
		if int64(len(body)) > m.cfg.MaxBodyBytes {
			m.reject(w, http.StatusRequestEntityTooLarge, TypeBodyTooLarge, fmt.Sprintf("the body is over %d bytes", m.cfg.MaxBodyBytes))
			return
		}
	}
	fp, err := m.fingerprint(r, body)
	if err != nil {
		m.reject(w, http.StatusBadRequest, TypeBodyInvalid, "the body was refused: "+err.Error())
		return
	}
	// The body read is given back to the handler, if it runs: not
	// before the claim, so that a replay or a refusal does not wrap it.
	restore := func() {
		if r.Body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	rk := RecordKey(scope, key)
	if m.cfg.BeginTxFunc != nil {
		restore()
		h.serveTx(w, r, rk, fp)
		return
	}
	// A client that hangs up mid-claim must not leave a claim nobody
	// settles (its retries would wait out the lease): the claim finishes.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.SettleTimeout)
	c, err := m.cfg.Store.Claim(cctx, rk, fp, m.cfg.Lease)
	ccancel()
	if a := decideClaim(c, err, false, m.cfg.NowFunc()); !a.run {
		m.answer(w, rk, a, nil)
		return
	}
	restore()
	h.run(w, r, rk, c)
}

// retryAfter is d in whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

func (m *Middleware) reject(w http.ResponseWriter, status int, typ, detail string) {
	writeProblem(w, status, typ, detail, 0)
	m.observe(OutcomeRejected, status)
}

// log is the logger for one record: a prefix of its hashed key, never the
// key or the scope.
func (m *Middleware) log(rk string) *zap.Logger {
	return m.cfg.Logger.With(zap.String("idempotency_record", rk[:min(len(rk), 16)]))
}

// fingerprint hashes method, path, raw query (see canonicalQuery), the
// listed headers and the body (or what Config.FingerprintFunc makes of
// it), each length-prefixed.
func (m *Middleware) fingerprint(r *http.Request, body []byte) (string, error) {
	if m.cfg.FingerprintFunc != nil {
		s, err := m.cfg.FingerprintFunc(r, body)
		if err != nil {
			return "", err
		}
		body = []byte(s)
	}
	// Every field but the body goes through one buffer, then the body's
	// length, then the body itself (not copied): one hash write each.
	buf := make([]byte, 0, 128)
	field := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	field(r.Method)
	field(r.URL.EscapedPath())
	field(canonicalQuery(r.URL.RawQuery))
	for _, name := range m.fphdrs {
		field(name)
		vs := r.Header.Values(name)
		var n [binary.MaxVarintLen64]byte
		field(string(n[:binary.PutUvarint(n[:], uint64(len(vs)))]))
		for _, v := range vs {
			field(v)
		}
	}
	buf = binary.AppendUvarint(buf, uint64(len(body)))
	h := sha256.New()
	h.Write(buf)
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return hexSum(sum), nil
}

// canonicalQuery is the raw query with its &-separated pairs in order of
// their raw key, pairs of one key kept in their order: nothing is
// decoded and nothing dropped, so queries that differ in any pair
// (malformed ones included) differ, and only the order of distinct keys
// is forgiven.
func canonicalQuery(raw string) string {
	if !strings.Contains(raw, "&") {
		return raw
	}
	pairs := strings.Split(raw, "&")
	key := func(p string) string {
		k, _, _ := strings.Cut(p, "=")
		return k
	}
	slices.SortStableFunc(pairs, func(a, b string) int { return strings.Compare(key(a), key(b)) })
	return strings.Join(pairs, "&")
}

// replay writes a stored response. Its header values are copied into
// one array (and Idempotent-Replayed's with them), each header's values
// capped so that appending to one cannot overwrite the next.
func replay(w http.ResponseWriter, resp *Response) {
	h := w.Header()
	n := 1
	for _, vs := range resp.Header {
		n += len(vs)
	}
	vals := make([]string, 0, n)
	for k, vs := range resp.Header {
		i := len(vals)
		vals = append(vals, vs...)
		h[k] = vals[i:len(vals):len(vals)]
	}
	vals = append(vals, "true")
	h[HeaderReplayed] = vals[len(vals)-1:]
	status := cmp.Or(resp.Status, http.StatusOK)
	if resp.NotRetained {
		writeProblem(w, status, TypeNotRetained, fmt.Sprintf(
			"the request ran and answered %d, but its response was not retained, so it cannot be replayed; the request will not run again with this key", status), 0)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(resp.Body)
}

type stateKey struct{}

// state is one claimed request, reachable from its context.
type state struct {
	mu       sync.Mutex
	released bool
	work     []any // attached with Attach
	streamed bool  // the response went out unstored
	tx       Tx    // the transactional mode's transaction
}

func fromContext(ctx context.Context) *state {
	st, _ := ctx.Value(stateKey{}).(*state)
	return st
}

// Release makes the request's key be released instead of completed when
// its handler returns: the response is sent but not stored, and a retry
// with the same key runs the handler again. Use it for a failure the
// client should correct (a validation error) or retry later (a 429). Any
// work attached with [Attach] is dropped. It reports whether ctx belongs
// to a request holding a key.
func Release(ctx context.Context) bool {
	st := fromContext(ctx)
	if st == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.released = true
	return true
}

func (h *handler) run(w http.ResponseWriter, r *http.Request, rk string, c Claim) {
	m := h.m
	st := &state{}
	// Not cancelled when the client hangs up: the request finishes and its
	// response is stored for the retry a dropped connection brings.
	ctx, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(r.Context()), stateKey{}, st))
	defer cancel(nil)
	k := m.keep(rk, c.Token, c.LeaseUntil, cancel)
	// Whatever ends this function, runtime.Goexit in the handler
	// included, the lease stops being extended.
	defer k.stop()
	var steps *steprec.Recorder
	if ss, ok := m.cfg.Store.(StepStore); ok {
		if len(c.Steps) > 0 {
			m.log(rk).Debug("idempotency: resuming after the steps recorded", zap.Int("steps", len(c.Steps)))
		}
		token := c.Token
		steps = steprec.New(c.Steps, func(ctx context.Context, s map[string]step.Record) error {
			return ss.SaveSteps(ctx, rk, token, s)
		}, func(e step.Event) { m.stepEvent(rk, e) })
		ctx = step.WithRecorder(ctx, steps)
	}
	rec := newRecorder(w, st, m.cfg.MaxResponseBytes, m.replay)

	exited := true
	defer func() {
		if exited {
			k.stop()
			m.settle(w, r, rec, st, rk, c.Token, ended{exit: exitGoexit})
		}
	}()
	panicked := call(h.next, rec, r.WithContext(ctx))
	exited = false
	k.stop()
	// The middleware's own cancellation: the lease could not be kept.
	leaseLost := errors.Is(context.Cause(ctx), ErrLeaseLost)
	if panicked != nil {
		m.settle(w, r, rec, st, rk, c.Token, ended{exit: exitPanicked, leaseLost: leaseLost})
		panic(panicked)
	}
	f := ended{exit: exitReturned, leaseLost: leaseLost}
	if steps != nil {
		f.stepUnknown = steps.Blocked()
	}
	m.settle(w, r, rec, st, rk, c.Token, f)
}

// settle carries out [decide] for a claimed request whose handler has
// ended, in either mode; f holds what the caller knows of the end (how
// the handler exited, a lost lease, a step of unknown outcome), and settle
// adds the response and the request's state. It makes the store calls
// the decision asks for, then releases the key (or rolls the transaction
// back), logs, answers and counts the outcome. The store calls are
// bounded by the settle timeout even when the client has gone.
func (m *Middleware) settle(w http.ResponseWriter, r *http.Request, rec *recorder, st *state, rk, token string, f ended) {
	ctx, cancel := m.settleContext(r)
	defer cancel()
	st.mu.Lock()
	released, work, streamed := st.released, st.work, st.streamed
	st.mu.Unlock()
	keep := stored(rec.response(), m.replay)
	f.tx, f.status = st.tx != nil, keep.Status
	f.released, f.work, f.streamed, f.discarded = released, len(work) > 0, streamed, rec.discarded
	// Headers added after the body was written count too.
	f.over = keep.Size() > m.cfg.MaxResponseBytes
	f.releaseServerErrors = m.cfg.ReleaseServerErrors
	a := decide(f, m.cfg.MaxResponseBytes)
	for a.next != callNone {
		m.logLines(rk, a.logs)
		switch a.next {
		case callComplete:
			f.completed = true
			if f.tx {
				f.completeErr = st.tx.Complete(ctx, rk, token, keep)
				if f.committing = f.completeErr == nil; f.committing {
					f.completeErr = st.tx.Commit(ctx)
				}
			} else {
				f.completeErr = m.cfg.Store.Complete(ctx, rk, token, Completion{Response: keep, Work: work})
			}
		case callKeepStatus:
			kctx, kcancel := ctx, context.CancelFunc(func() {})
			if f.completed {
				// A fresh timeout: the first call may have used all of its own.
				kctx, kcancel = m.settleContext(r)
			}
			f.keptStatus = true
			f.keptErr = m.cfg.Store.Complete(kctx, rk, token, Completion{Response: notRetained(keep, m.cfg.MaxResponseBytes)})
			kcancel()
		}
		a = decide(f, m.cfg.MaxResponseBytes)
	}
	if a.release {
		if f.tx {
			m.rollback(ctx, rk, st.tx, f.committing)
		} else {
			m.release(ctx, rk, token)
		}
	}
	m.answer(w, rk, a, func() {
		if !f.streamed {
			rec.deliver()
		}
	})
}

// answer writes a's log lines and its answer (a replay, a problem, or
// the handler's response through deliver), and counts its outcome.
func (m *Middleware) answer(w http.ResponseWriter, rk string, a action, deliver func()) {
	m.logLines(rk, a.logs)
	switch {
	case a.replay != nil:
		replay(w, a.replay)
	case a.problem != nil:
		writeProblem(w, a.problem.status, a.problem.typ, a.problem.detail, a.problem.retryAfter)
	case a.deliver:
		deliver()
	}
	m.observe(a.outcome, a.status)
}

func (m *Middleware) logLines(rk string, lines []logLine) {
	for _, l := range lines {
		m.log(rk).Log(l.level, l.msg, l.fields...)
	}
}

// settleContext bounds a store call made after the handler returned, even
// when the client has gone.
func (m *Middleware) settleContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.SettleTimeout)
}

// release gives the key back; a failure leaves the claim until its lease
// ends (a retry waits for it).
func (m *Middleware) release(ctx context.Context, rk, token string) {
	if err := m.cfg.Store.Release(ctx, rk, token); err != nil && !errors.Is(err, ErrNotOwner) {
		m.log(rk).Warn("idempotency: release failed", zap.Error(err))
	}
}

// notRetained is the record of a response that cannot be kept: its status
// and its headers but those describing the body it no longer has (none if
// even they are over max).
func notRetained(resp Response, max int) Response {
	h := http.Header{}
	for k, vs := range resp.Header {
		if (strings.HasPrefix(k, "Content-") && k != "Content-Location") || k == "Etag" || k == "Last-Modified" {
			continue
		}
		h[k] = vs
	}
	out := Response{Status: resp.Status, Header: h, NotRetained: true}
	if out.Size() > max {
		out.Header = http.Header{}
	}
	return out
}

// rollback ends tx without its work, which frees the key it holds.
// After a failed COMMIT the transaction, or its connection, is over: the
// rollback has nothing left to do, its failure is the commit's, which is
// logged already, so it is logged at debug level only (one line per event).
func (m *Middleware) rollback(ctx context.Context, rk string, tx Tx, afterCommit bool) {
	if err := tx.Rollback(ctx); err != nil {
		// The database rolls back a transaction whose connection ends.
		if afterCommit {
			m.log(rk).Debug("idempotency: rollback after the failed commit failed", zap.Error(err))
			return
		}
		m.log(rk).Warn("idempotency: rollback failed", zap.Error(err))
	}
}

// call runs next, returning what it panicked with.
func call(next http.Handler, w http.ResponseWriter, r *http.Request) (panicked any) {
	defer func() { panicked = recover() }()
	next.ServeHTTP(w, r)
	return nil
}

// keeper extends one claim's lease every Lease/3 while its handler runs:
// a timer, not a goroutine, so a request that ends before the first
// extension (most do) costs a timer started and stopped, and nothing
// that must be scheduled and waited for.
type keeper struct {
	m      *Middleware
	rk     string
	token  string
	until  time.Time // the lease's end as last extended
	cancel context.CancelCauseFunc
	period time.Duration

	mu      sync.Mutex
	stopped bool
	due     time.Time // when the timer was set to fire
	t       *time.Timer
	// armed counts the timer while it is set and its function while it
	// runs, so that stop can wait for both.
	armed sync.WaitGroup
}

// keep starts extending the lease of the claim holding token, which ends
// at until. It cancels the handler's context with ErrLeaseLost when the
// store says the claim is no longer ours, or when the lease ends without
// a successful extension. Stop it with keeper.stop.
func (m *Middleware) keep(rk, token string, until time.Time, cancel context.CancelCauseFunc) *keeper {
	k := &keeper{m: m, rk: rk, token: token, until: until, cancel: cancel, period: max(m.cfg.Lease/3, time.Millisecond)}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.due = time.Now().Add(k.period)
	k.armed.Add(1)
	k.t = time.AfterFunc(k.period, k.tick)
	return k
}

// stop ends the extensions and waits for one under way: none is made, and
// nothing of the keeper runs, once it returns. It may be called more than
// once.
func (k *keeper) stop() {
	k.mu.Lock()
	if !k.stopped {
		k.stopped = true
		if k.t.Stop() {
			k.armed.Done() // it will not fire
		}
	}
	k.mu.Unlock()
	k.armed.Wait()
}

// tick makes one extension, then sets the timer for the next, a period
// after this one was due (at once when that has passed, as a ticker
// does).
func (k *keeper) tick() {
	defer k.armed.Done()
	k.mu.Lock()
	stopped := k.stopped
	k.mu.Unlock()
	if stopped || !k.extend() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	now := time.Now()
	if k.due = k.due.Add(k.period); k.due.Before(now) {
		k.due = now
	}
	k.armed.Add(1)
	k.t.Reset(k.due.Sub(now))
}

// extend makes one extension; false means the lease is lost (the
// handler's context is cancelled) and no more are made.
func (k *keeper) extend() bool {
	m := k.m
	// The store dates the new lease from when it got the call, at the
	// earliest now: dated from the answer, the lease could end here a
	// whole settle timeout after it ended in the store.
	sent := m.cfg.NowFunc()
	ctx, done := context.WithTimeout(context.Background(), m.cfg.SettleTimeout)
	err := m.cfg.Store.Extend(ctx, k.rk, k.token, m.cfg.Lease)
	done()
	now := m.cfg.NowFunc()
	switch {
	case err == nil:
		k.until = sent.Add(m.cfg.Lease)
	case errors.Is(err, ErrNotOwner):
		m.log(k.rk).Warn("idempotency: lease lost: another request took the key over", zap.Error(err))
		k.cancel(ErrLeaseLost)
		return false
	case !now.Before(k.until):
		m.log(k.rk).Warn("idempotency: lease ran out and could not be extended", zap.Error(err))
		k.cancel(ErrLeaseLost)
		return false
	default:
		m.log(k.rk).Warn("idempotency: extend failed; retrying on the next tick", zap.Error(err))
	}
	return true
}

// stepEvent counts, logs and passes on one step event of record rk.
func (m *Middleware) stepEvent(rk string, e step.Event) {
	m.steps.Add(context.Background(), e.Kind, 1)
	switch e.Kind {
	case step.EventUnknown, step.EventParked, step.EventReconcileStillUnknown:
		m.log(rk).Warn("idempotency: step outcome "+e.Kind,
			zap.String("step", e.Step), zap.Stringer("policy", e.Policy), zap.Error(e.Err))
	default:
		m.log(rk).Info("idempotency: step "+e.Kind, zap.String("step", e.Step))
	}
	if m.cfg.ObserveStepFunc != nil {
		m.cfg.ObserveStepFunc(e)
	}
}
