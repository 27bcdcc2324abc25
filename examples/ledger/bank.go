package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The toy bank: the external effect a credit has before it is applied, as
// real workers have (a payment API, a partner's endpoint). Its faults are
// the ones a client of such an API must survive: outages (503), rate limits
// (429), slow answers, charges applied whose answer never arrives, and a
// bank that does not dedupe by the Idempotency-Key.
//
// The API:
//
//	POST /charges          Idempotency-Key: K, body {"ref":"R","account":"A","amount":N}
//	                       201 and the charge when newly charged; 200 and the first
//	                       charge for a repeated key (422 if its body differs); 400 for
//	                       a bad body or a missing key. With NonIdempotent every POST
//	                       charges again (201), whatever its key.
//	GET  /charges/R        200 and the first charge of ref R with "charges", how many
//	                       there are of R; 404 when none.
//	GET  /charges          every charge, one JSON object a line, in the order charged.
//	GET  /stats            counts for benches: see bankStats.
//
// Outages (503) and the rate limit (429) answer POST /charges and
// GET /charges/R only, each with Retry-After in whole seconds; GET /charges
// and GET /stats always answer, so a test can check the bank at any time.

// maxChargeBody bounds a POST /charges body.
const maxChargeBody = 64 << 10

// bankConfig configures the toy bank. The zero value is an idempotent bank
// that is always up, has no rate limit, answers every charge and never waits.
type bankConfig struct {
	// NonIdempotent charges again on every POST whatever its Idempotency-Key
	// (each charge gets its own id, the ref repeats): the hard case for a
	// client that retries. The key is then optional. Defaults to false: a
	// repeated key answers 200 with the key's first charge and charges
	// nothing new.
	NonIdempotent bool

	// OutageEvery and OutageFor make the bank down, from its start, during
	// [k*OutageEvery, k*OutageEvery+OutageFor) for k = 0, 1, ...: it answers
	// 503 with Retry-After (the seconds until the window ends, rounded up).
	// Both zero, the default, for no outage; otherwise
	// 0 < OutageFor < OutageEvery.
	OutageEvery, OutageFor time.Duration

	// Rate is the most requests per second the bank answers (a token
	// bucket); above it, 429 with Retry-After (the seconds until a token is
	// free, rounded up). Requests refused during an outage take no token.
	// Defaults to 0: no limit.
	Rate float64

	// Burst is the token bucket's size: how many requests may come at once.
	// Defaults to Rate rounded up (one second's worth), at least 1.
	Burst int

	// DropRate is the probability that a charge POST is applied (or, for a
	// repeated key, found) and then its connection closed without an
	// answer: the client cannot tell whether it was charged. Defaults to 0.
	DropRate float64

	// Delay is how long each charge POST waits, after its body is read and
	// before it is charged. A client that goes away meanwhile is charged
	// nothing. Defaults to 0.
	Delay time.Duration

	// RandFunc returns a number in [0, 1) for each drop decision; it is
	// called under the bank's lock. Defaults to math/rand/v2's Float64.
	RandFunc func() float64

	// chargingHook, when set, is called with the account when a charge POST
	// has passed its checks and starts (before the delay): a test hook.
	chargingHook func(account string)
}

// validate reports a configuration the bank cannot run with; the messages
// name the command's flags.
func (c bankConfig) validate() error {
	switch {
	case c.OutageEvery < 0 || c.OutageFor < 0:
		return errors.New("bank: -outage-every and -outage-for must not be negative")
	case (c.OutageEvery == 0) != (c.OutageFor == 0):
		return errors.New("bank: set both -outage-every and -outage-for, or neither")
	case c.OutageFor >= c.OutageEvery && c.OutageEvery > 0:
		return fmt.Errorf("bank: -outage-for %v must be shorter than -outage-every %v", c.OutageFor, c.OutageEvery)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("bank: -rate %v: use requests per second ≥ 0 (0: no limit)", c.Rate)
	case c.Burst < 0:
		return errors.New("bank: burst must not be negative")
	case !(c.DropRate >= 0 && c.DropRate <= 1):
		return fmt.Errorf("bank: -drop-rate %v: use a probability from 0 to 1", c.DropRate)
	case c.Delay < 0:
		return errors.New("bank: -delay must not be negative")
	}
	return nil
}

// charge is one charge the bank made, as its answers and GET /charges show it.
type charge struct {
	ID             string    `json:"id"` // the bank's id: ch_000001, ch_000002, ... in the order charged
	Ref            string    `json:"ref"`
	Account        string    `json:"account"`
	Amount         int64     `json:"amount"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	ChargedAt      time.Time `json:"charged_at"`
}

// chargeStatus is the answer to GET /charges/<ref>: the ref's first charge
// and how many charges the ref has (more than 1 only on a NonIdempotent
// bank, charged again).
type chargeStatus struct {
	charge
	Charges int `json:"charges"`
}

// bankStats is the answer to GET /stats.
type bankStats struct {
	// Started is when the bank started; outage windows and PerSecond count
	// from it.
	Started time.Time `json:"started"`
	// Charges is how many charges were made; Refs how many distinct refs
	// they have; Duplicates how many charges came after the first of their
	// ref (Charges - Refs).
	Charges    int `json:"charges"`
	Refs       int `json:"refs"`
	Duplicates int `json:"duplicates"`
	// PerSecond is the charges made in each second since Started ([0] is
	// the first second), up to the last second with a charge.
	PerSecond []int `json:"per_second"`
	// MaxConcurrent is, per account, the most charge POSTs of that account
	// in progress at once (past the outage, rate and body checks, through
	// the delay until answered); MaxConcurrentAccount the largest of them.
	MaxConcurrent        map[string]int `json:"max_concurrent"`
	MaxConcurrentAccount int            `json:"max_concurrent_account"`
	// Answers counts the answers to charge POSTs and GET /charges/<ref> by
	// method and status ("POST 201", "GET 404", "POST 503", ...);
	// "POST dropped" counts connections closed unanswered and "POST gone"
	// clients that left during the delay.
	Answers map[string]int `json:"answers"`
}

// bank is the toy bank's state and its HTTP handler. It is safe for
// concurrent use and starts no goroutines.
type bank struct {
	cfg     bankConfig
	start   time.Time
	limiter *rate.Limiter // nil without a rate limit
	mux     *http.ServeMux

	mu        sync.Mutex
	list      []charge         // in the order charged
	byKey     map[string]int   // Idempotency-Key → index in list (idempotent bank)
	byRef     map[string][]int // ref → indexes in list
	perSecond []int
	inFlight  map[string]int // account → charge POSTs in progress
	maxFlight map[string]int // account → the most at once
	answers   map[string]int
}

// newBank returns a bank that starts now (its outage windows count from
// now) and serves the API above.
func newBank(cfg bankConfig) (*bank, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.RandFunc == nil {
		cfg.RandFunc = mrand.Float64
	}
	b := &bank{
		cfg:       cfg,
		start:     time.Now(),
		mux:       http.NewServeMux(),
		byKey:     map[string]int{},
		byRef:     map[string][]int{},
		inFlight:  map[string]int{},
		maxFlight: map[string]int{},
		answers:   map[string]int{},
	}
	if cfg.Rate > 0 {
		burst := cfg.Burst
		if burst == 0 {
			burst = max(1, int(math.Ceil(cfg.Rate)))
		}
		b.limiter = rate.NewLimiter(rate.Limit(cfg.Rate), burst)
	}
	b.mux.HandleFunc("POST /charges", b.postCharge)
	b.mux.HandleFunc("GET /charges/{ref}", b.getCharge)
	b.mux.HandleFunc("GET /charges", b.listCharges)
	b.mux.HandleFunc("GET /stats", b.serveStats)
	return b, nil
}

// ServeHTTP serves the bank's API.
func (b *bank) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.mux.ServeHTTP(w, r) }

// charges returns every charge made, in the order charged.
func (b *bank) charges() []charge {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]charge(nil), b.list...)
}

// stats returns the bank's counts, as GET /stats answers them.
func (b *bank) stats() bankStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := bankStats{
		Started:       b.start,
		Charges:       len(b.list),
		Refs:          len(b.byRef),
		Duplicates:    len(b.list) - len(b.byRef),
		PerSecond:     append([]int{}, b.perSecond...),
		MaxConcurrent: make(map[string]int, len(b.maxFlight)),
		Answers:       make(map[string]int, len(b.answers)),
	}
	for a, n := range b.maxFlight {
		s.MaxConcurrent[a] = n
		s.MaxConcurrentAccount = max(s.MaxConcurrentAccount, n)
	}
	for k, n := range b.answers {
		s.Answers[k] = n
	}
	return s
}

// chargeRequest is a POST /charges body.
type chargeRequest struct {
	Ref, Account string
	Amount       int64
}

// parseChargeRequest reads a POST /charges body: a JSON object with
// non-empty string fields "ref" and "account" and "amount" a JSON integer,
// by the same rules as a credit. Other fields are ignored.
func parseChargeRequest(body []byte) (chargeRequest, error) {
	fields, err := decodeObject(string(body))
	if err != nil {
		return chargeRequest{}, err
	}
	var req chargeRequest
	if req.Ref, err = stringField(fields, "ref"); err != nil {
		return chargeRequest{}, err
	}
	if req.Account, req.Amount, err = accountAmount(fields); err != nil {
		return chargeRequest{}, err
	}
	return req, nil
}

func (b *bank) postCharge(w http.ResponseWriter, r *http.Request) {
	if !b.admit(w, "POST") {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxChargeBody))
	if err != nil {
		b.fail(w, "POST", http.StatusBadRequest, fmt.Sprintf("read body: %v", err))
		return
	}
	req, err := parseChargeRequest(body)
	if err != nil {
		b.fail(w, "POST", http.StatusBadRequest, "invalid charge: "+err.Error())
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" && !b.cfg.NonIdempotent {
		b.fail(w, "POST", http.StatusBadRequest, "missing Idempotency-Key header")
		return
	}

	b.begin(req.Account)
	defer b.end(req.Account)
	if b.cfg.chargingHook != nil {
		b.cfg.chargingHook(req.Account)
	}
	if b.cfg.Delay > 0 {
		t := time.NewTimer(b.cfg.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			// The client went away: charge nothing, so no charge is made
			// that nobody waits for. (A graceful shutdown waits instead.)
			t.Stop()
			b.count("POST gone")
			return
		}
	}
	c, status, drop := b.charge(key, req)
	switch {
	case status == http.StatusUnprocessableEntity:
		b.fail(w, "POST", status, "Idempotency-Key "+strconv.Quote(key)+" was used with another body")
	case drop:
		b.count("POST dropped")
		dropConnection(w)
	default:
		b.count("POST " + strconv.Itoa(status))
		writeJSON(w, status, c)
	}
}

// charge charges req (or finds the charge of its key on an idempotent
// bank) and reports the status to answer and whether to drop the answer.
func (b *bank) charge(key string, req chargeRequest) (c charge, status int, drop bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.cfg.NonIdempotent {
		if i, ok := b.byKey[key]; ok {
			c = b.list[i]
			if c.Ref != req.Ref || c.Account != req.Account || c.Amount != req.Amount {
				return c, http.StatusUnprocessableEntity, false
			}
			return c, http.StatusOK, b.dropLocked()
		}
	}
	now := time.Now()
	c = charge{
		ID:             fmt.Sprintf("ch_%06d", len(b.list)+1),
		Ref:            req.Ref,
		Account:        req.Account,
		Amount:         req.Amount,
		IdempotencyKey: key,
		ChargedAt:      now,
	}
	b.list = append(b.list, c)
	i := len(b.list) - 1
	if !b.cfg.NonIdempotent {
		b.byKey[key] = i
	}
	b.byRef[req.Ref] = append(b.byRef[req.Ref], i)
	sec := max(0, int(now.Sub(b.start)/time.Second))
	for len(b.perSecond) <= sec {
		b.perSecond = append(b.perSecond, 0)
	}
	b.perSecond[sec]++
	return c, http.StatusCreated, b.dropLocked()
}

func (b *bank) dropLocked() bool {
	return b.cfg.DropRate > 0 && b.cfg.RandFunc() < b.cfg.DropRate
}

// dropConnection closes the request's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// No connection of its own to close (HTTP/2, a recorder): abort the
	// answer, which the server does without writing one.
	panic(http.ErrAbortHandler)
}

func (b *bank) getCharge(w http.ResponseWriter, r *http.Request) {
	if !b.admit(w, "GET") {
		return
	}
	ref := r.PathValue("ref")
	b.mu.Lock()
	idx := b.byRef[ref]
	var st chargeStatus
	if len(idx) > 0 {
		st = chargeStatus{charge: b.list[idx[0]], Charges: len(idx)}
	}
	b.mu.Unlock()
	if len(idx) == 0 {
		b.fail(w, "GET", http.StatusNotFound, "no charge with ref "+strconv.Quote(ref))
		return
	}
	b.count("GET 200")
	writeJSON(w, http.StatusOK, st)
}

func (b *bank) listCharges(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, c := range b.charges() {
		_ = enc.Encode(c)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	_, _ = w.Write(buf.Bytes())
}

func (b *bank) serveStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, b.stats())
}

// admit answers 503 during an outage and 429 above the rate limit, and
// reports whether the request may go on.
func (b *bank) admit(w http.ResponseWriter, method string) bool {
	now := time.Now()
	if left, down := b.outage(now); down {
		b.refuse(w, method, http.StatusServiceUnavailable, left, "the bank is down")
		return false
	}
	if b.limiter != nil {
		res := b.limiter.ReserveN(now, 1)
		if wait := res.DelayFrom(now); !res.OK() || wait > 0 {
			res.CancelAt(now)
			b.refuse(w, method, http.StatusTooManyRequests, wait, "too many requests")
			return false
		}
	}
	return true
}

// outage reports whether the bank is down at now, and for how much longer.
func (b *bank) outage(now time.Time) (left time.Duration, down bool) {
	if b.cfg.OutageEvery <= 0 {
		return 0, false
	}
	into := now.Sub(b.start) % b.cfg.OutageEvery
	if into < 0 || into >= b.cfg.OutageFor {
		return 0, false
	}
	return b.cfg.OutageFor - into, true
}

// refuse answers status with Retry-After: wait in whole seconds, rounded
// up, at least 1.
func (b *bank) refuse(w http.ResponseWriter, method string, status int, wait time.Duration, msg string) {
	secs := max(1, int64((wait+time.Second-1)/time.Second))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	b.fail(w, method, status, msg)
}

// fail answers status with {"error": msg}.
func (b *bank) fail(w http.ResponseWriter, method string, status int, msg string) {
	b.count(method + " " + strconv.Itoa(status))
	writeJSON(w, status, map[string]string{"error": msg})
}

func (b *bank) count(answer string) {
	b.mu.Lock()
	b.answers[answer]++
	b.mu.Unlock()
}

func (b *bank) begin(account string) {
	b.mu.Lock()
	b.inFlight[account]++
	b.maxFlight[account] = max(b.maxFlight[account], b.inFlight[account])
	b.mu.Unlock()
}

func (b *bank) end(account string) {
	b.mu.Lock()
	if b.inFlight[account]--; b.inFlight[account] == 0 {
		delete(b.inFlight, account)
	}
	b.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// cmdBank runs the toy bank until SIGTERM/SIGINT; its first line of output
// is "listening on http://HOST:PORT".
func cmdBank(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("bank", stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen on `HOST:PORT` (port 0 picks a free one; the first line printed says which)")
	idempotent := fs.Bool("idempotent", true, "a repeated Idempotency-Key answers its first charge; false charges again on every POST")
	outageEvery := fs.Duration("outage-every", 0, "start an outage (503 with Retry-After) every `D`, the first at the start")
	outageFor := fs.Duration("outage-for", 0, "each outage lasts `D` (shorter than -outage-every)")
	rateN := fs.Float64("rate", 0, "answer 429 with Retry-After above `N` requests/s (0: no limit)")
	dropRate := fs.Float64("drop-rate", 0, "probability `R` that a charge is applied and its connection closed unanswered")
	delay := fs.Duration("delay", 0, "wait `D` before charging each POST")
	if err := parse(fs, args); err != nil {
		return err
	}
	b, err := newBank(bankConfig{
		NonIdempotent: !*idempotent,
		OutageEvery:   *outageEvery,
		OutageFor:     *outageFor,
		Rate:          *rateN,
		DropRate:      *dropRate,
		Delay:         *delay,
	})
	if err != nil {
		return usageError{err}
	}
	return serveBank(ctx, *addr, b, stdout)
}

// serveBank serves b on addr until ctx ends, then shuts down gracefully:
// the charges in progress are answered first.
func serveBank(ctx context.Context, addr string, b *bank, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bank: %w", err)
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("bank: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		<-served
		return fmt.Errorf("bank: shutdown: %w", err)
	}
	<-served
	return nil
}
