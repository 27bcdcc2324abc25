package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
)

// idemConcurrency is the number of HTTP clients sending at once.
const idemConcurrency = 32

// apiHandler is a small JSON API handler (the one idempotency's testing.B
// benchmark uses): it reads the body and answers 201 with a short JSON
// document.
var apiHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/credits/c-1")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"credit_id":"c-1","account":"acct-42","amount":500}`)
})

// plainIdempotency is the honest limit of the middleware: the same handler
// behind the store's own calls, made by hand with the store the middleware
// uses (so the same items, conditions and sizes). A new key is the store's
// Claim (its conditional PutItem), the handler, and its Complete (the
// UpdateItem storing the response); a replay is the Claim failing with the
// stored item, whose response is written back. What it leaves out is the
// middleware's own work: the fingerprint of the request, the key's scope,
// the lease timer, the recording of the response and the replay headers.
type plainIdempotency struct {
	store *idemdynamo.Store
}

// plainFingerprint stands for a request's fingerprint: as long as the
// middleware's (a SHA-256 in hex), not computed.
var plainFingerprint = strings.Repeat("f", 64)

func (p plainIdempotency) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sum := sha256.Sum256([]byte("plain\x00" + r.Header.Get(idempotency.HeaderKey)))
	key := hex.EncodeToString(sum[:])
	c, err := p.store.Claim(ctx, key, plainFingerprint, 30*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	switch c.Status {
	case idempotency.Claimed:
	case idempotency.Completed:
		for k, v := range c.Response.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(c.Response.Status)
		_, _ = w.Write(c.Response.Body)
		return
	default:
		http.Error(w, "in progress", http.StatusConflict)
		return
	}
	rec := httptest.NewRecorder()
	apiHandler.ServeHTTP(rec, r)
	resp := idempotency.Response{Status: rec.Code, Header: http.Header{
		"Content-Type": rec.Header().Values("Content-Type"), "Location": rec.Header().Values("Location"),
	}, Body: rec.Body.Bytes()}
	if err := p.store.Complete(ctx, key, c.Token, idempotency.Completion{Response: resp}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// httpLoad sends n POSTs to url from idemConcurrency clients, the i-th
// with the key key(i), and returns requests/s and this process's CPU per
// request (client and server: both sides of a row pay the client's share).
// Every answer must be 201; replayed says whether it must carry
// Idempotent-Replayed.
func httpLoad(ctx context.Context, client *http.Client, url string, n int, key func(i int) string, replayed bool) (rate float64, cpu time.Duration, err error) {
	m := readUsed()
	rate, err = workers(n, idemConcurrency, func(i int) error { return post(ctx, client, url, key(i), replayed) })
	if err != nil {
		return 0, 0, err
	}
	return rate, m.perMessage(n).cpu, nil
}

func post(ctx context.Context, client *http.Client, url, key string, replayed bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"account":"acct-42","amount":500}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderKey, key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: status %d: %.200s", url, resp.StatusCode, body)
	}
	if replayed && strings.Contains(url, "/idem") && resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		return fmt.Errorf("POST %s: a replay without %s", url, idempotency.HeaderReplayed)
	}
	return nil
}

// idemRows: the Idempotency-Key middleware on the DynamoDB store, behind
// an in-process net/http server on loopback, against the bare handler and
// against the bare handler plus the DynamoDB calls the store makes.
func (b *bench) idemRows() ([]row, error) {
	ctx := b.ctx
	n := max(b.n/4, 10)
	table, err := b.table(ctx, "idem")
	if err != nil {
		return nil, err
	}
	store, err := idemdynamo.New(idemdynamo.Config{Client: b.ddb, Table: table})
	if err != nil {
		return nil, err
	}
	mw, err := idempotency.New(idempotency.Config{Store: store, ScopeFunc: func(r *http.Request) (string, error) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			return "", errors.New("no bearer token")
		}
		return tok, nil
	}})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /bare", apiHandler)
	mux.Handle("POST /plain", plainIdempotency{store: store})
	mux.Handle("POST /idem", mw.Wrap(apiHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()
	transport := &http.Transport{MaxIdleConnsPerHost: idemConcurrency}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	base := "http://" + ln.Addr().String()

	var bare, bareCPU, plainNew, plainNewCPU, idemNew, idemNewCPU, plainRe, plainReCPU, idemRe, idemReCPU sample
	if err := b.interleave("idempotency", func(round int) ([]float64, error) {
		key := func(i int) string { return fmt.Sprintf("r%d-%d", round, i) }
		figs := make([]float64, 10) // each step's rate, then its CPU per request
		step := func(k int, path string, replayed bool) func() error {
			return func() error {
				rate, cpu, err := httpLoad(ctx, client, base+path, n, key, replayed)
				figs[2*k], figs[2*k+1] = rate, micros(cpu)
				return err
			}
		}
		// New keys first, then their replays; each group in turn.
		if err := inTurn(round, step(0, "/bare", false), step(1, "/plain", false), step(2, "/idem", false)); err != nil {
			return nil, err
		}
		if err := inTurn(round, step(3, "/plain", true), step(4, "/idem", true)); err != nil {
			return nil, err
		}
		return figs, nil
	}, &bare, &bareCPU, &plainNew, &plainNewCPU, &idemNew, &idemNewCPU, &plainRe, &plainReCPU, &idemRe, &idemReCPU); err != nil {
		return nil, err
	}
	const g = "Idempotency-Key middleware, DynamoDB"
	how := fmt.Sprintf("%s, new keys (bare, plain, middleware) then their replays (plain, middleware), each group forwards and backwards in turn; %d POSTs per run from %d clients to an in-process net/http server on loopback",
		b.interleaved(), n, idemConcurrency)
	return []row{
		row{group: g, name: "Idempotency-Key, new key vs handler + the store's 2 writes", value: idemNew, limit: plainNew, ratio: ratios(idemNew, plainNew), unit: "req/s",
			note: how + "; limit: the same handler behind the store's own Claim (a conditional PutItem) and Complete (an UpdateItem storing the response), called by hand on the middleware's store: the same two writes, items and conditions; " +
				"target: the middleware's own work (fingerprint, recording, a lease timer and no goroutine: +12 µs CPU in its testing.B) is small next to two DynamoDB round trips, so ≥ 0.95"}.with(atLeast(0.95)),
		row{group: g, name: "Idempotency-Key, replay vs handler + the store's 1 write", value: idemRe, limit: plainRe, ratio: ratios(idemRe, plainRe), unit: "req/s",
			note: "the same runs; limit: the store's own Claim called by hand, its conditional PutItem failing with the stored item, whose response is written back (a replay's one DynamoDB call); target as above"}.with(atLeast(0.95)),
		{group: g, name: "Idempotency-Key, new key vs bare handler (raw)", value: idemNew, limit: bare, ratio: ratios(idemNew, bare), unit: "req/s",
			note: "the same runs; limit: the handler without a key check; a new key waits for two DynamoDB round trips, which dominate: no target"},
		{group: g, name: "Idempotency-Key, replay vs bare handler (raw)", value: idemRe, limit: bare, ratio: ratios(idemRe, bare), unit: "req/s",
			note: "the same runs; a replay waits for one DynamoDB round trip: no target"},
		row{group: g, name: "Go CPU per request, new key vs handler + 2 writes", value: idemNewCPU, limit: plainNewCPU, ratio: ratios(idemNewCPU, plainNewCPU), unit: "µs",
			note: "the same runs; this process's CPU (HTTP client and server, SDK calls, middleware) per request; target: the middleware's +12 µs over a request of ~150 µs or more, so ≤ 1.2"}.with(atMost(1.2)),
		row{group: g, name: "Go CPU per request, replay vs handler + 1 write", value: idemReCPU, limit: plainReCPU, ratio: ratios(idemReCPU, plainReCPU), unit: "µs",
			note: "the same runs and measure; a replay decodes the stored record and writes its headers back; target as above"}.with(atMost(1.2)),
		{group: g, name: "Go CPU per request, bare handler", value: bareCPU, unit: "µs", note: "the same runs: HTTP client and server alone"},
	}, nil
}
