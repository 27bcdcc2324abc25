package opshttp

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/sqsonce/sqsonce/internal/printable"
)

// MaxReason is the most bytes of one reason /readyz shows (before
// escaping); a longer one is cut at a rune boundary and ends in "…".
const MaxReason = 300

// Readier is what /readyz asks: Ready returns nil when the component is
// ready to take work, else an error saying why not. It is called on every
// request, from the server's goroutines: it must be safe for concurrent
// use and quick (read a state; do not call out). *consumer.Consumer is
// one.
type Readier interface {
	Ready() error
}

// ReadyFunc adapts a function to [Readier].
type ReadyFunc func() error

// Ready returns f().
func (f ReadyFunc) Ready() error { return f() }

// Config configures the endpoints. The zero Config serves /healthz, and a
// /readyz that is always 200.
type Config struct {
	// Ready lists what /readyz waits for, typically each *consumer.Consumer
	// of the process: 200 when every one's Ready returns nil, 503 with the
	// reasons of the others. Empty: /readyz answers 200 whenever the
	// process serves, as /healthz does.
	Ready []Readier

	// Metrics serves GET /metrics: a *prom.Exporter (package opshttp/prom)
	// or any http.Handler, such as promhttp.Handler(). Defaults to none:
	// /metrics is not served (404).
	Metrics http.Handler
}

// New returns a ServeMux serving GET /healthz, GET /readyz and, when
// cfg.Metrics is set, GET /metrics (HEAD too; other methods get 405). It
// returns an error when an entry of cfg.Ready is nil.
func New(cfg Config) (*http.ServeMux, error) {
	ready := make([]Readier, len(cfg.Ready))
	for i, r := range cfg.Ready {
		if r == nil {
			return nil, fmt.Errorf("opshttp: Config.Ready[%d] is nil: list the consumers /readyz waits for", i)
		}
		ready[i] = r
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		write(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		for _, r := range ready {
			if err := r.Ready(); err != nil {
				b.WriteString("not ready: ")
				b.WriteString(reason(err))
				b.WriteByte('\n')
			}
		}
		if b.Len() > 0 {
			write(w, http.StatusServiceUnavailable, b.String())
			return
		}
		write(w, http.StatusOK, "ready\n")
	})
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	return mux, nil
}

// write sends a plain-text answer that no cache keeps.
func write(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// reason is err's text as one line of inert text of at most MaxReason
// bytes before escaping.
func reason(err error) string {
	s := err.Error()
	if s == "" {
		s = fmt.Sprintf("%T", err)
	}
	if len(s) > MaxReason {
		n := MaxReason
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return printable.Escape(s)
}
