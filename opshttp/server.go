package opshttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// errNoAddr is returned by Listen for an empty address.
var errNoAddr = errors.New("opshttp: no address to listen on: give HOST:PORT, e.g. \":9090\"")

// Server serves the endpoints on their own listener, from [Listen] until
// [Server.Shutdown].
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	err  error // Serve's error, other than http.ErrServerClosed; set before done closes
}

// Listen binds addr (HOST:PORT; ":0" picks a free port, see
// [Server.Addr]) and serves the endpoints [New] builds from cfg on it,
// in a goroutine of its own, until [Server.Shutdown]. A wrong cfg or an
// address that cannot be bound (in use, malformed) is an error now, at
// start-up, not later in a log line.
func Listen(addr string, cfg Config) (*Server, error) {
	if addr == "" {
		return nil, errNoAddr
	}
	mux, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("opshttp: listen on %s: %w", addr, err)
	}
	s := &Server{
		// Probes and scrapes are small requests: a client that sends its
		// headers slowly holds a connection for no more than this.
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = fmt.Errorf("opshttp: serve on %s: %w", ln.Addr(), err)
		}
	}()
	return s, nil
}

// Addr is the address the server listens on: with port 0 in Listen's
// address, the port picked.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops the server as http.Server.Shutdown does (no new
// connections; requests in progress finish) and returns once its
// goroutine has: nil, the error that had stopped it serving, or ctx's
// error when ctx ended before the requests in progress did (their
// connections are then closed). Call it after the consumers' Run
// returned, so that /readyz answers 503 while they drain.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	return errors.Join(s.err, err)
}
