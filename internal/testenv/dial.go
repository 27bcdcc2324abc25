package testenv

import (
	"context"
	"net"
	"net/http"
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
