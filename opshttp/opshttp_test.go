package opshttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/opshttp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// serve sends one request to h and returns the status and the body.
func serve(t *testing.T, h http.Handler, method, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String(), rec.Header()
}

func newMux(t *testing.T, cfg opshttp.Config) *http.ServeMux {
	t.Helper()
	mux, err := opshttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mux
}

func ready(err error) opshttp.Readier { return opshttp.ReadyFunc(func() error { return err }) }

func TestHealthz(t *testing.T) {
	t.Parallel()
	mux := newMux(t, opshttp.Config{Ready: []opshttp.Readier{ready(errors.New("consumer: draining"))}})
	code, body, h := serve(t, mux, http.MethodGet, "/healthz")
	if code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz of a process whose consumer is not ready: %d %q, want 200 (alive is not ready)", code, body)
	}
	if h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("/healthz headers %v", h)
	}
	if code, _, _ := serve(t, mux, http.MethodHead, "/healthz"); code != http.StatusOK {
		t.Errorf("HEAD /healthz %d, want 200", code)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		ready []opshttp.Readier
		code  int
		body  string
	}{
		{"no consumers", nil, http.StatusOK, "ready\n"},
		{"all ready", []opshttp.Readier{ready(nil), ready(nil)}, http.StatusOK, "ready\n"},
		{"one not running", []opshttp.Readier{ready(nil), ready(errors.New("consumer: not running"))}, http.StatusServiceUnavailable,
			"not ready: consumer: not running\n"},
		{"two not ready, in order", []opshttp.Readier{ready(errors.New("consumer: draining")), ready(nil), ready(errors.New("consumer: receives failing"))},
			http.StatusServiceUnavailable, "not ready: consumer: draining\nnot ready: consumer: receives failing\n"},
		{"an error without text", []opshttp.Readier{ready(errors.New(""))}, http.StatusServiceUnavailable, "not ready: *errors.errorString\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, h := serve(t, newMux(t, opshttp.Config{Ready: tc.ready}), http.MethodGet, "/readyz")
			if code != tc.code || body != tc.body {
				t.Errorf("/readyz = %d %q, want %d %q", code, body, tc.code, tc.body)
			}
			if h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
				t.Errorf("/readyz headers %v", h)
			}
		})
	}
}

// A reason is error text that may echo what a client or server wrote:
// /readyz shows it as one line of inert text, cut to MaxReason.
func TestReadyzEscapesReasons(t *testing.T) {
	t.Parallel()
	hostile := errors.New("consumer: receives failing: AccessDenied: not authorized for <b>queue</b>\r\nready\x1b[2J\u202egnp.exe\x00\xff")
	long := errors.New(strings.Repeat("é", opshttp.MaxReason)) // 2 bytes each: the cut falls inside a rune
	code, body, _ := serve(t, newMux(t, opshttp.Config{Ready: []opshttp.Readier{ready(hostile), ready(long)}}), http.MethodGet, "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d, want 503", code)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("/readyz body has %d lines, want one per reason:\n%q", len(lines), body)
	}
	want := `not ready: consumer: receives failing: AccessDenied: not authorized for <b>queue</b>\r\nready\x1b[2J\u202egnp.exe\x00\xff`
	if lines[0] != want {
		t.Errorf("hostile reason shown as\n%s\nwant\n%s", lines[0], want)
	}
	for _, r := range body {
		if r != '\n' && (!unicode.IsPrint(r) || r == 0x202e) {
			t.Errorf("body holds the raw rune %U", r)
		}
	}
	wantLong := "not ready: " + strings.Repeat("é", opshttp.MaxReason/2) + "…"
	if lines[1] != wantLong {
		t.Errorf("long reason: %d bytes %q…, want %d bytes, cut to MaxReason at a rune boundary", len(lines[1]), lines[1][:40], len(wantLong))
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	if code, _, _ := serve(t, newMux(t, opshttp.Config{}), http.MethodGet, "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics without Config.Metrics: %d, want 404", code)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("sqsonce_up 1\n")) })
	mux := newMux(t, opshttp.Config{Metrics: metrics})
	if code, body, _ := serve(t, mux, http.MethodGet, "/metrics"); code != http.StatusOK || body != "sqsonce_up 1\n" {
		t.Errorf("/metrics = %d %q, want Config.Metrics's page", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _, _ := serve(t, mux, http.MethodPost, path); code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d, want 405", path, code)
		}
	}
	// The mux takes routes of the program's own.
	mux.HandleFunc("GET /debug/vars", func(http.ResponseWriter, *http.Request) {})
	if code, _, _ := serve(t, mux, http.MethodGet, "/debug/vars"); code != http.StatusOK {
		t.Errorf("a route added to the mux: %d, want 200", code)
	}
}

func TestNilReadier(t *testing.T) {
	t.Parallel()
	_, err := opshttp.New(opshttp.Config{Ready: []opshttp.Readier{ready(nil), nil}})
	if err == nil || !strings.Contains(err.Error(), "Config.Ready[1] is nil") {
		t.Fatalf("New with a nil Readier: %v, want an error naming Config.Ready[1]", err)
	}
}
