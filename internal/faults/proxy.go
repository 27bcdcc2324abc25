package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"time"
)

// Proxy is a loopback HTTP proxy in front of one AWS endpoint that injects
// the same faults as [Transport], for clients in other processes: point
// their AWS_ENDPOINT_URL_* at Proxy.URL. A reset closes the client's TCP
// connection with RST.
type Proxy struct {
	// URL is the proxy's endpoint, http://127.0.0.1:PORT.
	URL string
	*injector
	rp  *httputil.ReverseProxy
	srv *http.Server
	ln  net.Listener
}

// Listen starts a Proxy on a free loopback port forwarding to target.
func Listen(target string, cfg Config) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faults: target %q is not a URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: listen: %w", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), injector: newInjector(cfg), ln: ln}
	p.rp = httputil.NewSingleHostReverseProxy(u)
	p.rp.ErrorLog = nil
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return p.srv.Close()
}

// ServeHTTP forwards the call, or answers it with a fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, err := p.decide(r.Context())
	if err != nil {
		return
	}
	switch kind {
	case "":
		p.rp.ServeHTTP(w, r)
	case KindResetBefore:
		drain(r)
		reset(w)
	case KindResetAfter:
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		reset(w)
	default:
		status, code, msg := errorAnswer(r, kind)
		drain(r)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Query-Error", code+";Sender")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":%q,"message":%q}`, code, msg)
	}
}

// reset closes the client's connection with a TCP RST.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}
