package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/consumer"
)

// newTestBankClient is a client of the bank at url; its idle connections
// are closed when the test ends.
func newTestBankClient(t *testing.T, url string, timeout time.Duration, backPressure bool) *bankClient {
	t.Helper()
	b, err := newBankClient(url, timeout, backPressure, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.client.CloseIdleConnections)
	return b
}

// TestBankClientClassifies: each answer of the bank becomes the error the
// consumer needs: 200/201 charged; 429/503 Unavailable with the
// Retry-After (seconds or an HTTP date), or a plain transient failure
// with back-pressure off; another 4xx permanent, the answer quoted with
// its control bytes escaped and cut; another 5xx, a timeout or a
// connection closed unanswered transient (outcome unknown).
func TestBankClientClassifies(t *testing.T) {
	t.Parallel()
	const date = "in 90 s" // an HTTP date 90 s after the answer, written when answering
	hostile := "\x1b]0;owned\x07\x1b[31mno such account\r\n" + strings.Repeat("x", 400)
	const (
		charged     = "charged"
		unavailable = "unavailable"
		rateLimited = "rate limited" // Unavailable, marked for -adaptive
		permanent   = "permanent"
		transient   = "transient"
	)
	for _, tc := range []struct {
		name         string
		status       int
		header, body string
		drop, hang   bool
		noBP         bool
		want         string
		wantAfter    time.Duration // unavailable: the Retry-After, ±1 s
		wantIn       []string      // in the error text
		wantNotIn    []string
	}{
		{name: "201", status: 201, want: charged},
		{name: "200 (the key's first charge)", status: 200, want: charged},
		{name: "503 seconds", status: 503, header: "7", want: unavailable, wantAfter: 7 * time.Second},
		{name: "429 date", status: 429, header: date, want: rateLimited, wantAfter: 90 * time.Second},
		{name: "503 without Retry-After", status: 503, want: unavailable},
		{name: "503, back-pressure off", status: 503, header: "7", noBP: true, want: transient},
		{name: "422", status: 422, body: `{"error":"Idempotency-Key was used with another body"}`, want: permanent, wantIn: []string{"422", "another body"}},
		{name: "404 hostile answer", status: 404, body: hostile, want: permanent,
			wantIn: []string{`\x1b]0;owned\a\x1b[31mno such account\r\n`, "…"}, wantNotIn: []string{"\x1b", "\r", strings.Repeat("x", 300)}},
		{name: "500", status: 500, want: transient, wantIn: []string{"outcome unknown"}},
		{name: "502", status: 502, want: transient},
		{name: "timeout", hang: true, want: transient, wantIn: []string{"outcome unknown"}},
		{name: "closed unanswered", drop: true, want: transient, wantIn: []string{"outcome unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case tc.drop:
					dropConnection(w)
					return
				case tc.hang:
					<-release
					return
				}
				switch tc.header {
				case "":
				case date:
					w.Header().Set("Retry-After", time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
				default:
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			defer close(release)
			b := newTestBankClient(t, srv.URL, 200*time.Millisecond, !tc.noBP)
			err := b.charge(context.Background(), credit{ID: "c1", Account: "A", Amount: 5})
			got := transient
			var ue *consumer.UnavailableError
			var pe *consumer.PermanentError
			switch {
			case err == nil:
				got = charged
			case errors.As(err, &ue) && ue.RateLimited:
				got = rateLimited
			case errors.As(err, &ue):
				got = unavailable
			case errors.As(err, &pe):
				got = permanent
			}
			if got != tc.want {
				t.Fatalf("charge = %v (%s), want %s", err, got, tc.want)
			}
			if err != nil {
				t.Logf("error: %v", err)
			}
			// An HTTP date has whole seconds: up to a second less.
			if ue != nil && (ue.RetryAfter < tc.wantAfter-2*time.Second || ue.RetryAfter > tc.wantAfter+time.Second) {
				t.Errorf("Retry-After read as %s, want %s", ue.RetryAfter, tc.wantAfter)
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not hold %q", err, s)
				}
			}
			for _, s := range tc.wantNotIn {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q holds %q", err, s)
				}
			}
		})
	}
}

// TestBankClientTransportResend: the bank applies a charge and closes the
// reused keep-alive connection unanswered. Go's transport POSTs the same
// Idempotency-Key again by itself on a new connection; the idempotent bank
// answers with the first charge: charged once, and the client counts the
// re-send. With the transport's re-send off, the client sees the broken
// connection (outcome unknown) and the consumer's retry, with the same
// key, charges nothing new either.
func TestBankClientTransportResend(t *testing.T) {
	t.Parallel()
	for _, noResend := range []bool{false, true} {
		name := "transport re-sends"
		if noResend {
			name = "transport re-send off"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// c1 answered (its connection kept alive), c2 dropped, then
			// every answer given.
			rolls := []float64{0.9, 0.0}
			var mu sync.Mutex
			bank, srv := startTestBank(t, bankConfig{DropRate: 0.5, RandFunc: func() float64 {
				mu.Lock()
				defer mu.Unlock()
				if len(rolls) == 0 {
					return 0.9
				}
				r := rolls[0]
				rolls = rolls[1:]
				return r
			}})
			c := newTestBankClient(t, srv.URL, 5*time.Second, true)
			c.noTransportResend = noResend
			ctx := context.Background()
			if err := c.charge(ctx, credit{ID: "c1", Account: "A", Amount: 5}); err != nil {
				t.Fatalf("c1: %v", err)
			}
			err := c.charge(ctx, credit{ID: "c2", Account: "A", Amount: 7})
			if noResend {
				if err == nil || c.resent.Load() != 0 {
					t.Fatalf("c2 with the re-send off: %v, %d re-sends; want the broken connection, none", err, c.resent.Load())
				}
				// The consumer's retry of the credit: the same key.
				err = c.charge(ctx, credit{ID: "c2", Account: "A", Amount: 7})
			} else if c.resent.Load() != 1 {
				t.Errorf("%d re-sends counted, want 1", c.resent.Load())
			}
			if err != nil {
				t.Fatalf("c2: %v", err)
			}
			st := bank.stats()
			if st.Charges != 2 || st.Refs != 2 || st.Answers["POST dropped"] != 1 || st.Answers["POST 200"] != 1 {
				t.Errorf("bank: %d charges of %d refs, answers %v; want 2 of 2, one dropped, the re-send answered 200", st.Charges, st.Refs, st.Answers)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"12":                            12 * time.Second,
		" 3 ":                           3 * time.Second,
		"0":                             0,
		"-5":                            0,
		"1.5":                           0,
		"soon":                          0,
		"99999999999":                   24 * time.Hour,
		"Fri, 02 Jan 2026 03:05:05 GMT": time.Minute,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0, // past
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestNewBankClientRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"bank", "ftp://bank", "http://", ":"} {
		if _, err := newBankClient(u, time.Second, true, zap.NewNop()); err == nil || !isUsage(err) {
			t.Errorf("newBankClient(%q) = %v, want a usage error", u, err)
		}
	}
}
