package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// newTestBank is a bank on cfg; it fails the test on a bad cfg.
func newTestBank(t *testing.T, cfg bankConfig) *bank {
	t.Helper()
	b, err := newBank(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startTestBank serves a bank on cfg over HTTP until the test ends.
func startTestBank(t *testing.T, cfg bankConfig) (*bank, *httptest.Server) {
	t.Helper()
	b := newTestBank(t, cfg)
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv
}

// chargeBody is a POST /charges body.
func chargeBody(ref, account string, amount int64) string {
	return fmt.Sprintf(`{"ref":%q,"account":%q,"amount":%d}`, ref, account, amount)
}

// call serves one request on h in-process (no network, so it runs in a
// synctest bubble); key "" sends no Idempotency-Key.
func call(h http.Handler, method, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decode reads a JSON answer into a v of type T.
func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("answer %d %q: %v", rec.Code, rec.Body, err)
	}
	return v
}

// wantStatus fails unless rec answered status.
func wantStatus(t *testing.T, what string, rec *httptest.ResponseRecorder, status int) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("%s: %d %s, want %d", what, rec.Code, strings.TrimSpace(rec.Body.String()), status)
	}
}

// listed is what GET /charges lists.
func listed(t *testing.T, h http.Handler) []charge {
	t.Helper()
	rec := call(h, "GET", "/charges", "", "")
	wantStatus(t, "GET /charges", rec, http.StatusOK)
	var out []charge
	for line := range bytes.Lines(rec.Body.Bytes()) {
		var c charge
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("GET /charges line %q: %v", line, err)
		}
		out = append(out, c)
	}
	return out
}

// TestBankIdempotent: a repeated Idempotency-Key answers 200 with the first
// charge and charges nothing new; the same key with another body is 422.
func TestBankIdempotent(t *testing.T) {
	t.Parallel()
	b := newTestBank(t, bankConfig{})
	first := call(b, "POST", "/charges", "c1", chargeBody("c1", "A", 5))
	wantStatus(t, "first POST", first, http.StatusCreated)
	c1 := decode[charge](t, first)
	if c1.ID == "" || c1.Ref != "c1" || c1.Account != "A" || c1.Amount != 5 || c1.IdempotencyKey != "c1" {
		t.Fatalf("first POST answered %+v", c1)
	}
	again := call(b, "POST", "/charges", "c1", chargeBody("c1", "A", 5))
	wantStatus(t, "repeated POST", again, http.StatusOK)
	if got := decode[charge](t, again); got != c1 {
		t.Fatalf("repeated POST answered %+v, want the first charge %+v", got, c1)
	}
	for _, body := range []string{chargeBody("c1", "A", 6), chargeBody("c1", "B", 5), chargeBody("other", "A", 5)} {
		wantStatus(t, "same key, body "+body, call(b, "POST", "/charges", "c1", body), http.StatusUnprocessableEntity)
	}
	wantStatus(t, "second key", call(b, "POST", "/charges", "c2", chargeBody("c2", "A", 7)), http.StatusCreated)

	if got := listed(t, b); len(got) != 2 || got[0] != c1 || got[1].Ref != "c2" {
		t.Fatalf("GET /charges listed %+v, want c1 then c2", got)
	}
	st := call(b, "GET", "/charges/c1", "", "")
	wantStatus(t, "GET /charges/c1", st, http.StatusOK)
	if got := decode[chargeStatus](t, st); got.charge != c1 || got.Charges != 1 {
		t.Fatalf("GET /charges/c1 = %+v, want the first charge and 1 charge", got)
	}
	wantStatus(t, "GET unknown ref", call(b, "GET", "/charges/nope", "", ""), http.StatusNotFound)
	if s := b.stats(); s.Charges != 2 || s.Refs != 2 || s.Duplicates != 0 || s.Answers["POST 200"] != 1 || s.Answers["POST 422"] != 3 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestBankNonIdempotent: with NonIdempotent every POST charges again,
// whatever its key; each charge has its own id, and GET /charges/<ref>
// answers the first with the count.
func TestBankNonIdempotent(t *testing.T) {
	t.Parallel()
	b := newTestBank(t, bankConfig{NonIdempotent: true})
	var ids []string
	for _, key := range []string{"c1", "c1", "", "other"} {
		rec := call(b, "POST", "/charges", key, chargeBody("c1", "A", 5))
		wantStatus(t, "POST key "+key, rec, http.StatusCreated)
		ids = append(ids, decode[charge](t, rec).ID)
	}
	got := listed(t, b)
	if len(got) != 4 {
		t.Fatalf("GET /charges listed %d charges, want 4: %+v", len(got), got)
	}
	seen := map[string]bool{}
	for i, c := range got {
		if c.ID != ids[i] || c.Ref != "c1" || seen[c.ID] {
			t.Fatalf("charge %d = %+v; answered ids %v", i, c, ids)
		}
		seen[c.ID] = true
	}
	st := decode[chargeStatus](t, call(b, "GET", "/charges/c1", "", ""))
	if st.ID != ids[0] || st.Charges != 4 {
		t.Fatalf("GET /charges/c1 = %+v, want the first charge %s and 4 charges", st, ids[0])
	}
	if s := b.stats(); s.Charges != 4 || s.Refs != 1 || s.Duplicates != 3 {
		t.Fatalf("stats = %+v, want 4 charges of 1 ref", s)
	}
}

// TestBankBadRequests: a body that is not a charge, or a missing
// Idempotency-Key on an idempotent bank, answers 400 and charges nothing.
func TestBankBadRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, key, body, want string }{
		{"not JSON", "k", `{"ref":`, "not a JSON object"},
		{"array", "k", `[1]`, "not a JSON object"},
		{"trailing data", "k", chargeBody("r", "A", 1) + `{}`, "trailing data"},
		{"no ref", "k", `{"account":"A","amount":1}`, `missing field \"ref\"`},
		{"empty ref", "k", `{"ref":"","account":"A","amount":1}`, `field \"ref\" is empty`},
		{"no account", "k", `{"ref":"r","amount":1}`, `missing field \"account\"`},
		{"no amount", "k", `{"ref":"r","account":"A"}`, `missing field \"amount\"`},
		{"fractional amount", "k", `{"ref":"r","account":"A","amount":1.5}`, "JSON integer"},
		{"quoted amount", "k", `{"ref":"r","account":"A","amount":"1"}`, "JSON integer"},
		{"no key", "", chargeBody("r", "A", 1), "missing Idempotency-Key"},
		{"too large", "k", `{"ref":"` + strings.Repeat("x", maxChargeBody) + `"}`, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBank(t, bankConfig{})
			rec := call(b, "POST", "/charges", tc.key, tc.body)
			wantStatus(t, "POST", rec, http.StatusBadRequest)
			if !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("answer %q does not say %q", rec.Body, tc.want)
			}
			if got := b.charges(); len(got) != 0 {
				t.Fatalf("a bad request charged %+v", got)
			}
		})
	}
}

// TestBankOutage: during [k*every, k*every+for) from the start, charge
// POSTs and GET /charges/<ref> answer 503 with Retry-After (the seconds
// left, rounded up) and charge nothing; GET /charges and GET /stats answer.
func TestBankOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newTestBank(t, bankConfig{OutageEvery: 10 * time.Second, OutageFor: 3 * time.Second})
		start := time.Now()
		for _, step := range []struct {
			at         time.Duration // since the start
			down       bool
			retryAfter string
		}{
			{0, true, "3"},
			{1500 * time.Millisecond, true, "2"},
			{2999 * time.Millisecond, true, "1"},
			{3 * time.Second, false, ""},
			{9999 * time.Millisecond, false, ""},
			{10 * time.Second, true, "3"},
			{12500 * time.Millisecond, true, "1"},
			{13 * time.Second, false, ""},
			{40 * time.Second, true, "3"},
		} {
			time.Sleep(time.Until(start.Add(step.at)))
			what := fmt.Sprintf("at %v", step.at)
			before := len(b.charges())
			ref := "c" + step.at.String()
			rec := call(b, "POST", "/charges", ref, chargeBody(ref, "A", 1))
			get := call(b, "GET", "/charges/"+ref, "", "")
			if !step.down {
				wantStatus(t, what+": POST", rec, http.StatusCreated)
				wantStatus(t, what+": GET /charges/"+ref, get, http.StatusOK)
				continue
			}
			for _, r := range []*httptest.ResponseRecorder{rec, get} {
				wantStatus(t, what, r, http.StatusServiceUnavailable)
				if got := r.Header().Get("Retry-After"); got != step.retryAfter {
					t.Fatalf("%s: Retry-After %q, want %q", what, got, step.retryAfter)
				}
			}
			if len(b.charges()) != before {
				t.Fatalf("%s: a POST during the outage charged", what)
			}
			if got := len(listed(t, b)); got != before {
				t.Fatalf("%s: GET /charges listed %d charges during the outage, want %d", what, got, before)
			}
			wantStatus(t, what+": GET /stats", call(b, "GET", "/stats", "", ""), http.StatusOK)
		}
		if s := b.stats(); s.Charges != 3 || s.Answers["POST 503"] != 6 || s.Answers["GET 503"] != 6 {
			t.Fatalf("stats = %+v, want 3 charges, 6 POSTs and 6 GETs refused", s)
		}
	})
}

// TestBankRate: above Rate requests per second (bursts of Rate, rounded
// up) charge POSTs and GET /charges/<ref> answer 429 with Retry-After (the
// seconds until a token is free, rounded up); GET /charges does not count.
func TestBankRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newTestBank(t, bankConfig{Rate: 2})
		post := func(ref string) *httptest.ResponseRecorder {
			return call(b, "POST", "/charges", ref, chargeBody(ref, "A", 1))
		}
		wantStatus(t, "1st", post("c1"), http.StatusCreated)
		wantStatus(t, "2nd", post("c2"), http.StatusCreated)
		for range 3 {
			listed(t, b) // not limited, takes no token
		}
		third := post("c3")
		wantStatus(t, "3rd in the same instant", third, http.StatusTooManyRequests)
		if got := third.Header().Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After %q, want 1 (a token in 0.5 s, rounded up)", got)
		}
		wantStatus(t, "GET in the same instant", call(b, "GET", "/charges/c1", "", ""), http.StatusTooManyRequests)

		time.Sleep(500 * time.Millisecond) // one token back
		wantStatus(t, "after 0.5 s", post("c3"), http.StatusCreated)
		wantStatus(t, "again after 0.5 s", post("c4"), http.StatusTooManyRequests)
		time.Sleep(time.Second) // two tokens back
		wantStatus(t, "after 1.5 s", call(b, "GET", "/charges/c3", "", ""), http.StatusOK)
		wantStatus(t, "after 1.5 s", post("c4"), http.StatusCreated)
		wantStatus(t, "after 1.5 s", post("c5"), http.StatusTooManyRequests)
		if got := len(b.charges()); got != 4 {
			t.Fatalf("%d charges, want 4: a refused POST charged", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		b := newTestBank(t, bankConfig{Rate: 0.25})
		wantStatus(t, "1st", call(b, "POST", "/charges", "c1", chargeBody("c1", "A", 1)), http.StatusCreated)
		time.Sleep(500 * time.Millisecond)
		rec := call(b, "POST", "/charges", "c2", chargeBody("c2", "A", 1))
		wantStatus(t, "2nd", rec, http.StatusTooManyRequests)
		if got := rec.Header().Get("Retry-After"); got != "4" {
			t.Fatalf("Retry-After %q, want 4 (a token in 3.5 s, rounded up)", got)
		}
	})
}

// TestBankDelay: each charge POST waits Delay before it is charged; a
// client that goes away meanwhile is charged nothing.
func TestBankDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newTestBank(t, bankConfig{Delay: 5 * time.Second})
		answered := make(chan *httptest.ResponseRecorder, 1)
		go func() { answered <- call(b, "POST", "/charges", "c1", chargeBody("c1", "A", 1)) }()
		time.Sleep(5*time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case rec := <-answered:
			t.Fatalf("answered %d before the delay", rec.Code)
		default:
		}
		if got := b.charges(); len(got) != 0 {
			t.Fatalf("charged %+v before the delay", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case rec := <-answered:
			wantStatus(t, "after the delay", rec, http.StatusCreated)
		default:
			t.Fatal("no answer after the delay")
		}

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req := httptest.NewRequestWithContext(ctx, "POST", "/charges", strings.NewReader(chargeBody("c2", "A", 1)))
			req.Header.Set("Idempotency-Key", "c2")
			b.ServeHTTP(httptest.NewRecorder(), req)
		}()
		time.Sleep(time.Second)
		cancel() // the client goes away mid-delay
		<-done
		if got := b.charges(); len(got) != 1 {
			t.Fatalf("charges %+v: the client that went away was charged", got)
		}
		if got := b.stats().Answers["POST gone"]; got != 1 {
			t.Fatalf(`answers["POST gone"] = %d, want 1`, got)
		}
	})
}

// TestBankDrop: a dropped charge is applied and its connection closed
// unanswered: the client sees an error, the charge exists, and a retry of
// the same key answers that charge.
func TestBankDrop(t *testing.T) {
	t.Parallel()
	rolls := []float64{0.05, 0.5, 0.09, 0.95}
	var mu sync.Mutex
	b, srv := startTestBank(t, bankConfig{DropRate: 0.1, RandFunc: func() float64 {
		mu.Lock()
		defer mu.Unlock()
		r := rolls[0]
		rolls = rolls[1:]
		return r
	}})
	// A fresh connection each time: Go's transport sends a request with an
	// Idempotency-Key again by itself when a reused connection closes.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	post := func(key, body string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", srv.URL+"/charges", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err == nil {
			defer resp.Body.Close()
			_, _ = io.ReadAll(resp.Body)
		}
		return resp, err
	}
	if resp, err := post("c1", chargeBody("c1", "A", 5)); err == nil {
		t.Fatalf("a dropped charge answered %d", resp.StatusCode)
	}
	got := b.charges()
	if len(got) != 1 || got[0].Ref != "c1" {
		t.Fatalf("after the drop the bank holds %+v, want the charge of c1", got)
	}
	resp, err := post("c1", chargeBody("c1", "A", 5))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("retry of the dropped key: %v %v, want 200", resp, err)
	}
	if _, err := post("c2", chargeBody("c2", "A", 5)); err == nil {
		t.Fatal("the second drop answered")
	}
	resp, err = post("c3", chargeBody("c3", "A", 5))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("an undropped charge: %v %v, want 201", resp, err)
	}
	if s := b.stats(); s.Charges != 3 || s.Answers["POST dropped"] != 2 || s.Answers["POST 200"] != 1 || s.Answers["POST 201"] != 1 {
		t.Fatalf("stats = %+v, want 3 charges, 2 dropped", s)
	}
	// In-process (no connection to take over) the answer is aborted.
	d := newTestBank(t, bankConfig{DropRate: 1})
	func() {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want http.ErrAbortHandler", r)
			}
		}()
		call(d, "POST", "/charges", "c1", chargeBody("c1", "A", 5))
	}()
	if got := d.charges(); len(got) != 1 {
		t.Fatalf("an aborted answer's charge: %+v, want 1 charge", got)
	}
}

// TestBankStats: GET /stats counts the most charge POSTs in progress at
// once per account and the charges made in each second.
func TestBankStats(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newTestBank(t, bankConfig{Delay: time.Second})
		var wg sync.WaitGroup
		for i, account := range []string{"A", "A", "A", "B"} {
			wg.Go(func() {
				ref := fmt.Sprintf("c%d", i)
				call(b, "POST", "/charges", ref, chargeBody(ref, account, 1))
			})
		}
		wg.Wait() // all four overlap in their delay; charged at 1 s
		for i := range 3 {
			ref := fmt.Sprintf("s%d", i)
			call(b, "POST", "/charges", ref, chargeBody(ref, "B", 1)) // one at a time; charged at 2, 3, 4 s
		}
		time.Sleep(2 * time.Second)
		wg.Go(func() { call(b, "POST", "/charges", "late", chargeBody("late", "B", 1)) }) // charged at 7 s
		wg.Wait()

		s := decode[bankStats](t, call(b, "GET", "/stats", "", ""))
		if s.MaxConcurrent["A"] != 3 || s.MaxConcurrent["B"] != 1 || s.MaxConcurrentAccount != 3 {
			t.Fatalf("max concurrent %v (account max %d), want A 3, B 1", s.MaxConcurrent, s.MaxConcurrentAccount)
		}
		if want := []int{0, 4, 1, 1, 1, 0, 0, 1}; !slices.Equal(s.PerSecond, want) {
			t.Fatalf("per second %v, want %v", s.PerSecond, want)
		}
		if s.Charges != 8 || s.Answers["POST 201"] != 8 {
			t.Fatalf("stats = %+v, want 8 charges", s)
		}
	})
}

// TestBankConcurrent: many clients POST overlapping keys at once; each key
// is charged once, and every POST of a key answers its one charge.
func TestBankConcurrent(t *testing.T) {
	t.Parallel()
	b, srv := startTestBank(t, bankConfig{})
	const keys, copies = 40, 5
	ids := make([][]string, keys)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for k := range keys {
		for range copies {
			wg.Go(func() {
				ref := fmt.Sprintf("c%d", k)
				req, _ := http.NewRequest("POST", srv.URL+"/charges", strings.NewReader(chargeBody(ref, fmt.Sprint("A", k%3), 1)))
				req.Header.Set("Idempotency-Key", ref)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var c charge
				if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || (resp.StatusCode != 200 && resp.StatusCode != 201) {
					t.Errorf("POST %s: %d %v", ref, resp.StatusCode, err)
					return
				}
				mu.Lock()
				ids[k] = append(ids[k], c.ID)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if got := len(b.charges()); got != keys {
		t.Fatalf("%d charges, want %d", got, keys)
	}
	for k, got := range ids {
		for _, id := range got {
			if id != got[0] {
				t.Fatalf("key c%d answered charges %v, want one", k, got)
			}
		}
	}
	if s := b.stats(); s.Answers["POST 201"] != keys || s.Answers["POST 200"] != keys*(copies-1) {
		t.Fatalf("answers %v", s.Answers)
	}
}

// TestBankCommand: `ledger bank` prints "listening on http://HOST:PORT" as
// its first line with the real port, serves the bank there, and exits 0
// when its context ends.
func TestBankCommand(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		c := run(ctx, []string{"-queue", "ignored", "bank", "-idempotent=false", "-delay", "1ms"}, pw, &stderr)
		pw.Close()
		code <- c
	}()
	first, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %q)", err, stderr.String())
	}
	m := regexp.MustCompile(`^listening on (http://127\.0\.0\.1:([1-9][0-9]*))\n$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line %q, want listening on http://127.0.0.1:PORT", first)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	client := &http.Client{Transport: &http.Transport{}}
	for range 2 {
		req, _ := http.NewRequest("POST", m[1]+"/charges", strings.NewReader(chargeBody("c1", "A", 5)))
		req.Header.Set("Idempotency-Key", "c1")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST: %d, want 201 (-idempotent=false charges again)", resp.StatusCode)
		}
	}
	resp, err := client.Get(m[1] + "/charges")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := bytes.Count(body, []byte("\n")); n != 2 {
		t.Fatalf("GET /charges listed %d lines, want 2:\n%s", n, body)
	}
	client.CloseIdleConnections()
	cancel()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d after the context ended, want 0 (stderr %q)", c, stderr.String())
	}
}

// TestBankCommandUsage: a flag the bank cannot run with exits 2 and says
// what to set.
func TestBankCommandUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-drop-rate", "1.5"}, "-drop-rate 1.5: use a probability from 0 to 1"},
		{[]string{"-drop-rate", "NaN"}, "use a probability from 0 to 1"},
		{[]string{"-outage-every", "10s"}, "set both -outage-every and -outage-for"},
		{[]string{"-outage-for", "10s"}, "set both -outage-every and -outage-for"},
		{[]string{"-outage-every", "10s", "-outage-for", "10s"}, "must be shorter than -outage-every"},
		{[]string{"-outage-every", "-1s", "-outage-for", "1s"}, "must not be negative"},
		{[]string{"-rate", "-1"}, "-rate -1: use requests per second"},
		{[]string{"-delay", "-1s"}, "-delay must not be negative"},
		{[]string{"-idempotent=maybe"}, "invalid boolean value"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), append([]string{"bank"}, tc.args...), &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Fatalf("stdout %q, stderr %q: want %q in stderr", stdout.String(), stderr.String(), tc.want)
			}
		})
	}
}

// TestServeBankGraceful: when its context ends the bank stops listening
// and answers the charge in progress before it returns.
func TestServeBankGraceful(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	charging := make(chan struct{})
	release := make(chan struct{})
	b := newTestBank(t, bankConfig{chargingHook: func(string) {
		close(charging)
		<-release
	}})
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- serveBank(ctx, "127.0.0.1:0", b, pw)
		pw.Close()
	}()
	first, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(first, "listening on "))
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/charges", strings.NewReader(chargeBody("c1", "A", 5)))
		req.Header.Set("Idempotency-Key", "c1")
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-charging
	cancel()
	select {
	case err := <-served:
		t.Fatalf("serveBank returned %v with a charge in progress", err)
	case code := <-answered:
		t.Fatalf("answered %d before the charge was released", code)
	default:
	}
	close(release)
	if code := <-answered; code != http.StatusCreated {
		t.Fatalf("the charge in progress at shutdown answered %d, want 201", code)
	}
	if err := <-served; err != nil {
		t.Fatalf("serveBank: %v", err)
	}
	if _, err := client.Get(url + "/charges"); err == nil {
		t.Fatal("the bank still answers after shutdown")
	}
}

// TestBankSIGTERM: the ledger binary's bank prints its address first,
// serves there, and exits 0 on SIGTERM, as the reliability suite runs it.
func TestBankSIGTERM(t *testing.T) {
	cmd := exec.Command(ledgerBinary(t), "-queue", "ignored", "bank", "-rate", "100", "-delay", "1ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // this test's process only
	first, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(first), "listening on ")
	if err != nil || !ok {
		t.Fatalf("first line %q (%v), want listening on URL", first, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(st, []byte(`"charges":0`)) {
		t.Fatalf("GET /stats: %d %s", resp.StatusCode, st)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v, want exit 0 (stderr %q)", err, stderr.String())
	}
}

// TestLedgerHelpListsBank: `ledger help` shows the bank and its flags.
func TestLedgerHelpListsBank(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, want := range []string{"\n  bank ", "-idempotent=true|false", "-outage-every D -outage-for D", "-rate N", "-drop-rate R", "-delay D", "GET /charges"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
