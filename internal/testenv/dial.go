package testenv

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// WrappingHTTPClient is the SDK's own HTTP client, dialing through wrap:
// each connection it opens is wrap's (to count dials, or to watch or slow
// a connection).
func WrappingHTTPClient(wrap func(net.Conn) net.Conn) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(conn), nil
		}
	})
}

// LateConn returns from each Write Late after its bytes went out: the
// writer goroutine of an HTTP request runs late, as on a busy CPU, so the
// response is in before the request's writing ends (see internal/sdkhttp).
type LateConn struct {
	net.Conn
	Late time.Duration
}

func (c LateConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	time.Sleep(c.Late)
	return n, err
}

// LateHTTPClient is the SDK's own HTTP client on LateConn connections
// that return 5 ms late, counting in dials the connections it opens.
// Unguarded against the SDK's request-body race (internal/sdkhttp), each
// call then closes its connection, so calls one after another open one
// each; guarded, they share one.
func LateHTTPClient(dials *atomic.Int64) *awshttp.BuildableClient {
	return WrappingHTTPClient(func(conn net.Conn) net.Conn {
		dials.Add(1)
		return LateConn{Conn: conn, Late: 5 * time.Millisecond}
	})
}
