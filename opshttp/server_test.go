package opshttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sqsonce/sqsonce/opshttp"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Listen serves the endpoints over TCP until Shutdown, which returns once
// the server's goroutine has (goleak checks it at the end of the run).
func TestListen(t *testing.T) {
	t.Parallel()
	var state guarded[error]
	state.set(errors.New("consumer: not running"))
	srv, err := opshttp.Listen("127.0.0.1:0", opshttp.Config{Ready: []opshttp.Readier{opshttp.ReadyFunc(state.get)}})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr().String()
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready: consumer: not running\n" {
		t.Errorf("/readyz before start %d %q", code, body)
	}
	state.set(nil)
	if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz once ready %d %q", code, body)
	}
	http.DefaultClient.CloseIdleConnections()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("GET after Shutdown succeeded, want the connection refused")
	}
}

func TestListenFailsAtStart(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name, addr string
		cfg        opshttp.Config
		want       string
	}{
		{"no address", "", opshttp.Config{}, `give HOST:PORT, e.g. ":9090"`},
		{"address in use", taken.Addr().String(), opshttp.Config{}, "opshttp: listen on " + taken.Addr().String()},
		{"malformed address", "localhost:http-ish", opshttp.Config{}, "opshttp: listen on localhost:http-ish"},
		{"nil Readier", "127.0.0.1:0", opshttp.Config{Ready: []opshttp.Readier{nil}}, "Config.Ready[0] is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := opshttp.Listen(tc.addr, tc.cfg)
			if err == nil {
				_ = srv.Shutdown(context.Background())
				t.Fatalf("Listen(%q) succeeded, want an error", tc.addr)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Listen(%q) = %v, want it to say %q", tc.addr, err, tc.want)
			}
		})
	}
}

// guarded is a value read and written from different goroutines.
type guarded[T any] struct {
	mu sync.Mutex
	v  T
}

func (a *guarded[T]) get() T {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v
}

func (a *guarded[T]) set(v T) {
	a.mu.Lock()
	a.v = v
	a.mu.Unlock()
}
