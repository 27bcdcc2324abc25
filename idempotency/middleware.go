package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// Header names.
const (
	// HeaderKey is the request header carrying the key.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a replayed response.
	HeaderReplayed = "Idempotent-Replayed"
)

// DefaultReplayHeaders are the response headers stored and replayed when
// Config.ReplayHeaders is empty.
var DefaultReplayHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
	"Location", "ETag", "Last-Modified", "Cache-Control",
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
	// key can run again once the lease ends. Defaults to 30 seconds. The
	// transactional mode (BeginTxFunc) has no lease: the request's
	// transaction holds the key.
	Lease time.Duration
	// MaxBodyBytes caps the request body; larger bodies answer 413.
	// Defaults to 1 MiB.
	MaxBodyBytes int64
	// MaxResponseBytes caps the stored response (body plus allow-listed
	// headers). A larger response is delivered but not stored: the key is
	// released and the outcome counted (OutcomeNotStored). Defaults to
	// 256 KiB, under DynamoDB's 400 KB item limit.
	MaxResponseBytes int
	// ReplayHeaders are the response headers stored and replayed.
	// Set-Cookie is never stored (listing it is an error). Defaults to
	// [DefaultReplayHeaders].
	ReplayHeaders []string
	// FingerprintHeaders are request headers added to the fingerprint
	// (method, path, canonical query and body). Defaults to none.
	FingerprintHeaders []string
	// ReleaseServerErrors releases the key after a 5xx response instead of
	// storing it, so a retry runs the handler again. Defaults to false:
	// a 5xx is stored and replayed like any response (Stripe's rule). In
	// the transactional mode (BeginTxFunc) a 5xx always rolls back and
	// releases.
	ReleaseServerErrors bool
	// SettleTimeout bounds each store call: the claim, each lease
	// extension, and the completion or release after the handler returns
	// (made even when the client has gone). Defaults to 10 seconds.
	SettleTimeout time.Duration
	// BeginTxFunc, when set, runs each keyed request in a transaction it
	// opens (the transactional mode; postgres.Store.BeginTx is one). The
	// transaction claims the key ([Tx.Claim]) before the handler runs and
	// holds it until it ends, so nothing keeps a lease: a retry meanwhile
	// gets 409 at once, and a request whose connection or process dies
	// frees its key as its transaction ends. The store's Claim, Extend and
	// Release are not used. The handler reaches the transaction through
	// its request's context ([TxFromContext], unwrapped by the store's
	// package, e.g. postgres.TxFromContext) and does its work in it. When
	// the handler returns, the middleware stores the response in the same
	// transaction ([Tx.Complete]) and commits; only then is the response
	// sent. A panic, [Release], a 5xx (whatever ReleaseServerErrors says),
	// a response too large to store and a failed commit roll it back,
	// which frees the key: nothing of the request is left, and a retry
	// runs the handler again. A failed begin or claim answers 503 and runs
	// nothing.
	// [Transact] is not available in this mode. Defaults to nil: the
	// handler's own effects and the stored response are separate writes.
	BeginTxFunc func(ctx context.Context) (Tx, error)
	// ObserveFunc, when set, is called once per request that takes a key,
	// with its outcome. Defaults to nil.
	ObserveFunc func(Event)
	// MeterProvider, when set, counts every request that takes a key in
	// sqsonce.idempotency.requests, by outcome (see the README's
	// Observability section). Defaults to nil: nothing is measured.
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
	// a panic, or a 5xx with ReleaseServerErrors).
	OutcomeReleased
	// OutcomeNotStored: the response was too large to store; the key was
	// released.
	OutcomeNotStored
	// OutcomeLeaseLost: the lease was taken over before completion.
	OutcomeLeaseLost
	// OutcomeStoreError: the store failed to claim or complete.
	OutcomeStoreError
	// OutcomeCommitFailed: the transactional completion failed; nothing
	// was committed.
	OutcomeCommitFailed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"rejected", "executed", "replayed", "in_progress", "key_reused",
	"released", "not_stored", "lease_lost", "store_error", "commit_failed"}

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

// ErrNoKey is returned by [Transact] outside a request that holds a key.
var ErrNoKey = errors.New("idempotency: no idempotency key is held by this request")

// ErrResponseStarted is returned by [Transact] once the response has been
// streamed to the client (it was too large to store), so the writes could
// no longer commit with it.
var ErrResponseStarted = errors.New("idempotency: the response was already sent uncommitted (too large to store)")

// Middleware is the Idempotency-Key middleware; [Middleware.Wrap] is its
// func(http.Handler) http.Handler.
type Middleware struct {
	cfg     Config
	methods map[string]bool
	replay  []string // canonical names
	fphdrs  []string
	counts  [numOutcomes]atomic.Int64
	metric  *telemetry.Results
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
	for _, meth := range cfg.Methods {
		m.methods[meth] = true
	}
	for _, h := range cfg.ReplayHeaders {
		h = http.CanonicalHeaderKey(h)
		if h == "Set-Cookie" {
			return nil, errors.New("idempotency: Config.ReplayHeaders lists Set-Cookie: a cookie is never stored or replayed")
		}
		m.replay = append(m.replay, h)
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
//     buffered, stored with the completed record (with the writes handed
//     to [Transact], in one transaction), then sent. Its context is not
//     cancelled when the client hangs up (the retry a dropped connection
//     brings then gets the stored response), only when the lease is lost
//     (cause [ErrLeaseLost]).
//   - [Release], a panic, or a response too large to store release the
//     key instead, so a retry runs again.
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
		m.reject(w, http.StatusBadRequest, TypeKeyInvalid, "an Idempotency-Key is 1 to 255 visible ASCII characters, bare or in double quotes")
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
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rk := RecordKey(scope, key)
	fp := m.fingerprint(r, body)
	if m.cfg.BeginTxFunc != nil {
		h.serveTx(w, r, rk, fp)
		return
	}
	// A client that hangs up mid-claim must not leave a claim nobody
	// settles (its retries would wait out the lease): the claim finishes.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.SettleTimeout)
	c, err := m.cfg.Store.Claim(cctx, rk, fp, m.cfg.Lease)
	ccancel()
	if err != nil {
		m.log(rk).Warn("idempotency: claim failed", zap.Error(err))
		writeProblem(w, http.StatusServiceUnavailable, TypeStoreUnavailable, "the idempotency store did not answer; nothing ran", 1)
		m.observe(OutcomeStoreError, http.StatusServiceUnavailable)
		return
	}
	switch c.Status {
	case Claimed:
		h.run(w, r, rk, c)
	case Completed:
		replay(w, c.Response)
		m.observe(OutcomeReplayed, c.Response.Status)
	case InProgress:
		writeProblem(w, http.StatusConflict, TypeInProgress, "a request with this key is still running; retry after it ends",
			retryAfter(c.LeaseUntil.Sub(m.cfg.NowFunc())))
		m.observe(OutcomeInProgress, http.StatusConflict)
	case KeyReused:
		writeProblem(w, http.StatusUnprocessableEntity, TypeKeyReused, "this key was used for a different request (method, path, query or body)", 0)
		m.observe(OutcomeKeyReused, http.StatusUnprocessableEntity)
	default:
		m.log(rk).Error("idempotency: claim: unexpected status", zap.Int("status", int(c.Status)))
		writeProblem(w, http.StatusInternalServerError, TypeStoreUnavailable, "", 0)
		m.observe(OutcomeStoreError, http.StatusInternalServerError)
	}
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

// fingerprint hashes method, path, canonical query (keys sorted), the
// listed headers and the body, each length-prefixed.
func (m *Middleware) fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	field([]byte(r.Method))
	field([]byte(r.URL.EscapedPath()))
	field([]byte(r.URL.Query().Encode()))
	for _, name := range m.fphdrs {
		field([]byte(name))
		vs := r.Header.Values(name)
		field(binary.AppendUvarint(nil, uint64(len(vs))))
		for _, v := range vs {
			field([]byte(v))
		}
	}
	field(body)
	return hex.EncodeToString(h.Sum(nil))
}

// replay writes a stored response.
func replay(w http.ResponseWriter, resp *Response) {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = slices.Clone(vs)
	}
	h.Set(HeaderReplayed, "true")
	w.WriteHeader(cmp.Or(resp.Status, http.StatusOK))
	_, _ = w.Write(resp.Body)
}

type stateKey struct{}

// state is one claimed request, reachable from its context.
type state struct {
	mu       sync.Mutex
	released bool
	writes   []types.TransactWriteItem
	builds   []Build
	streamed bool // the response went out unstored
	tx       Tx   // the transactional mode's transaction
}

func fromContext(ctx context.Context) *state {
	st, _ := ctx.Value(stateKey{}).(*state)
	return st
}

// Release makes the request's key be released instead of completed when
// its handler returns: the response is sent but not stored, and a retry
// with the same key runs the handler again. Use it for a failure the
// client should correct (a validation error) or retry later (a 429). Any
// writes handed to [Transact] are dropped. It reports whether ctx belongs
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
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { m.keep(rk, c.Token, c.LeaseUntil, cancel, stop) })
	rec := newRecorder(w, st, m.cfg.MaxResponseBytes, m.replay)

	panicked := call(h.next, rec, r.WithContext(ctx))
	close(stop)
	wg.Wait()

	sctx, scancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.SettleTimeout)
	defer scancel()
	release := func() {
		if err := m.cfg.Store.Release(sctx, rk, c.Token); err != nil && !errors.Is(err, ErrNotOwner) {
			// The claim stays until its lease ends; a retry waits for it.
			m.log(rk).Warn("idempotency: release failed", zap.Error(err))
		}
	}
	if panicked != nil {
		release()
		m.observe(OutcomeReleased, http.StatusInternalServerError)
		panic(panicked)
	}

	st.mu.Lock()
	released, writes, builds, streamed := st.released, st.writes, st.builds, st.streamed
	st.mu.Unlock()
	tx := len(writes) > 0 || len(builds) > 0
	resp := rec.response()
	keep := stored(resp, m.replay)
	// Headers added after the body was written count too.
	over := keep.Size() > m.cfg.MaxResponseBytes
	switch {
	case streamed, over && !tx && !released:
		if !streamed {
			rec.deliver()
		}
		release()
		m.log(rk).Warn("idempotency: response too large to store: delivered, key released",
			zap.Int("max_response_bytes", m.cfg.MaxResponseBytes))
		m.observe(OutcomeNotStored, resp.Status)
		return
	case rec.discarded, over && tx && !released:
		release()
		m.log(rk).Warn("idempotency: transactional response too large to store: nothing committed, key released",
			zap.Int("max_response_bytes", m.cfg.MaxResponseBytes))
		writeProblem(w, http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's writes; nothing was committed", 0)
		m.observe(OutcomeNotStored, http.StatusInternalServerError)
		return
	case released || (m.cfg.ReleaseServerErrors && resp.Status >= 500):
		release()
		rec.deliver()
		m.observe(OutcomeReleased, resp.Status)
		return
	}
	err := m.cfg.Store.Complete(sctx, rk, c.Token, Completion{Response: keep, Writes: writes, Builds: builds})
	switch {
	case err == nil:
		rec.deliver()
		m.observe(OutcomeExecuted, resp.Status)
		return
	case errors.Is(err, ErrTooLarge) && !tx:
		rec.deliver()
		release()
		m.log(rk).Warn("idempotency: response too large for the store: delivered, key released", zap.Error(err))
		m.observe(OutcomeNotStored, resp.Status)
		return
	case errors.Is(err, ErrTooLarge):
		release()
		m.log(rk).Warn("idempotency: transactional response too large for the store: nothing committed, key released", zap.Error(err))
		writeProblem(w, http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's writes; nothing was committed", 0)
		m.observe(OutcomeNotStored, http.StatusInternalServerError)
		return
	}
	if !tx {
		// The handler's effects happened: its response is the truth, even
		// unstored.
		if errors.Is(err, ErrNotOwner) {
			m.log(rk).Warn("idempotency: lease lost before completion: another request owns the key; the effect may repeat", zap.Error(err))
			m.observe(OutcomeLeaseLost, resp.Status)
		} else {
			m.log(rk).Warn("idempotency: complete failed: the key runs again once its lease ends", zap.Error(err))
			m.observe(OutcomeStoreError, resp.Status)
		}
		rec.deliver()
		return
	}
	// Transactional: nothing was committed, so the handler's response would
	// be a lie.
	var cerr *ConditionError
	switch {
	case errors.Is(err, ErrNotOwner):
		m.log(rk).Warn("idempotency: lease lost before the commit: nothing committed", zap.Error(err))
		writeProblem(w, http.StatusConflict, TypeLeaseLost, "the request's lease was taken over before it committed; nothing was committed", 1)
		m.observe(OutcomeLeaseLost, http.StatusConflict)
	case errors.As(err, &cerr):
		release()
		writeProblem(w, http.StatusConflict, TypeWriteConflict, "a condition on the request's writes failed; nothing was committed", 0)
		m.observe(OutcomeCommitFailed, http.StatusConflict)
	default:
		release()
		m.log(rk).Warn("idempotency: commit failed: nothing committed, key released", zap.Error(err))
		writeProblem(w, http.StatusServiceUnavailable, TypeCommitFailed, "the request's writes could not be committed; nothing was committed", 1)
		m.observe(OutcomeCommitFailed, http.StatusServiceUnavailable)
	}
}

func (m *Middleware) rollback(ctx context.Context, rk string, tx Tx) {
	if err := tx.Rollback(ctx); err != nil {
		// The database rolls back a transaction whose connection ends.
		m.log(rk).Warn("idempotency: rollback failed", zap.Error(err))
	}
}

// settleTx ends a request of the transactional mode: the response is
// stored in the handler's transaction and committed, then sent; or the
// transaction is rolled back and the key released.
func (m *Middleware) settleTx(ctx context.Context, w http.ResponseWriter, rec *recorder, st *state, rk, token string, release func()) {
	st.mu.Lock()
	released := st.released
	st.mu.Unlock()
	resp := rec.response()
	keep := stored(resp, m.replay)
	switch {
	case rec.discarded, keep.Size() > m.cfg.MaxResponseBytes && !released:
		m.rollback(ctx, rk, st.tx)
		release()
		m.log(rk).Warn("idempotency: transactional response too large to store: rolled back, key released",
			zap.Int("max_response_bytes", m.cfg.MaxResponseBytes))
		writeProblem(w, http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's work; nothing was committed", 0)
		m.observe(OutcomeNotStored, http.StatusInternalServerError)
		return
	case released || resp.Status >= 500:
		// The handler failed or gave the key back: its work must not
		// commit, and a retry runs it again.
		m.rollback(ctx, rk, st.tx)
		release()
		rec.deliver()
		m.observe(OutcomeReleased, resp.Status)
		return
	}
	err := st.tx.Complete(ctx, rk, token, keep)
	if err == nil {
		err = st.tx.Commit(ctx)
	}
	if err == nil {
		rec.deliver()
		m.observe(OutcomeExecuted, resp.Status)
		return
	}
	m.rollback(ctx, rk, st.tx)
	switch {
	case errors.Is(err, ErrNotOwner):
		m.log(rk).Warn("idempotency: lease lost before the commit: rolled back", zap.Error(err))
		writeProblem(w, http.StatusConflict, TypeLeaseLost, "the request's lease was taken over before it committed; nothing was committed", 1)
		m.observe(OutcomeLeaseLost, http.StatusConflict)
	case errors.Is(err, ErrTooLarge):
		release()
		m.log(rk).Warn("idempotency: transactional response too large for the store: rolled back, key released", zap.Error(err))
		writeProblem(w, http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's work; nothing was committed", 0)
		m.observe(OutcomeNotStored, http.StatusInternalServerError)
	default:
		// A commit whose outcome is unknown (the connection died after
		// sending it) may have committed: Release is fenced on
		// IN_PROGRESS, so it then leaves the completed record, and the
		// retry gets the stored response.
		release()
		m.log(rk).Warn("idempotency: commit failed: rolled back, key released", zap.Error(err))
		writeProblem(w, http.StatusServiceUnavailable, TypeCommitFailed, "the request's work could not be committed; nothing was committed", 1)
		m.observe(OutcomeCommitFailed, http.StatusServiceUnavailable)
	}
}

// call runs next, returning what it panicked with.
func call(next http.Handler, w http.ResponseWriter, r *http.Request) (panicked any) {
	defer func() { panicked = recover() }()
	next.ServeHTTP(w, r)
	return nil
}

// keep extends the lease every Lease/3 until stop is closed. It cancels
// the handler's context with ErrLeaseLost when the store says the claim is
// no longer ours, or when the lease ends without a successful extension.
func (m *Middleware) keep(rk, token string, until time.Time, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	t := time.NewTicker(max(m.cfg.Lease/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, done := context.WithTimeout(context.Background(), m.cfg.SettleTimeout)
		err := m.cfg.Store.Extend(ctx, rk, token, m.cfg.Lease)
		done()
		now := m.cfg.NowFunc()
		switch {
		case err == nil:
			until = now.Add(m.cfg.Lease)
		case errors.Is(err, ErrNotOwner):
			m.log(rk).Warn("idempotency: lease lost: another request took the key over", zap.Error(err))
			cancel(ErrLeaseLost)
			return
		case !now.Before(until):
			m.log(rk).Warn("idempotency: lease ran out and could not be extended", zap.Error(err))
			cancel(ErrLeaseLost)
			return
		default:
			m.log(rk).Warn("idempotency: extend failed; retrying on the next tick", zap.Error(err))
		}
	}
}
