package sdkhttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// sqsOn is an SQS client on srv whose connections write late, counting
// the connections it opens.
func sqsOn(t *testing.T, srv *httptest.Server, dials *atomic.Int64, guard guardFunc, late time.Duration) *sqs.Client {
	t.Helper()
	return sqsOnConn(srv, guard, func(conn net.Conn) net.Conn {
		dials.Add(1)
		return testenv.LateConn{Conn: conn, Late: late}
	})
}

// sqsOnConn is an SQS client on srv whose connections wrap makes.
func sqsOnConn(srv *httptest.Server, guard guardFunc, wrap func(net.Conn) net.Conn) *sqs.Client {
	hc := testenv.WrappingHTTPClient(wrap)
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   hc,
	}, func(o *sqs.Options) {
		if guard != nil {
			o.HTTPClient = guard(o.HTTPClient)
		}
	})
}

type guardFunc = func(sdkhttp.Doer) sdkhttp.Doer

// guards are the ways a client can be guarded, and not (nil).
var guards = []struct {
	name  string
	guard guardFunc
}{{"unguarded", nil}, {"GuardDrain", sdkhttp.GuardDrain}, {"Guard", sdkhttp.Guard}}

// TestGuardKeepsConnection: calls one after another, on connections whose
// writer runs late, all go over one connection once guarded. Unguarded,
// net/http closes each call's connection when it drains the request body
// the SDK has closed, and the next call opens another (checked below, so
// that the test shows the race it guards against still happens).
func TestGuardKeepsConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"Messages":[]}`))
	}))
	defer srv.Close()
	const calls = 20
	for _, g := range guards {
		guard := g.guard != nil
		var dials atomic.Int64
		client := sqsOn(t, srv, &dials, g.guard, 5*time.Millisecond)
		for range calls {
			if _, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/000000000000/q")}); err != nil {
				t.Fatalf("%s: ReceiveMessage: %v", g.name, err)
			}
		}
		t.Logf("%s: %d calls, %d connections", g.name, calls, dials.Load())
		switch {
		case guard && dials.Load() != 1:
			t.Errorf("%s: %d connections for %d calls one after another, want 1", g.name, dials.Load(), calls)
		case !guard && dials.Load() < calls/2:
			t.Errorf("unguarded: %d connections for %d calls: the race this guards against did not happen", dials.Load(), calls)
		}
	}
}

// TestGuardKeepsResponse: a response whose body is still arriving when the
// request's writer, running late, drains the closed request body. Guarded,
// each call reaches the server once. Unguarded, net/http closes the
// connection under the response body, the SDK retries, and the server
// answers the call again: for ReceiveMessage, the first answer's messages
// are lost until their visibility timeout.
func TestGuardKeepsResponse(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("Content-Length", "15")
		_, _ = w.Write([]byte(`{"Messages":`))
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte(`[]}`))
	}))
	defer srv.Close()
	const calls = 5
	for _, g := range guards {
		guard := g.guard != nil
		requests.Store(0)
		var dials atomic.Int64
		client := sqsOn(t, srv, &dials, g.guard, 2*time.Millisecond)
		var failed int
		for range calls {
			if _, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/000000000000/q")}); err != nil {
				failed++
			}
		}
		t.Logf("%s: %d calls, %d requests, %d failed", g.name, calls, requests.Load(), failed)
		switch {
		case guard && (requests.Load() != calls || failed > 0):
			t.Errorf("%s: %d requests (%d calls failed) for %d calls, want one each", g.name, requests.Load(), failed, calls)
		case !guard && requests.Load() == calls:
			t.Errorf("unguarded: one request per call: the race this guards against did not happen")
		}
	}
}

func TestGuardOnce(t *testing.T) {
	g := sdkhttp.Guard(http.DefaultClient)
	if sdkhttp.Guard(g) != g || sdkhttp.GuardDrain(g) != g {
		t.Error("Guard or GuardDrain of a guarded client wrapped it again")
	}
	d := sdkhttp.GuardDrain(http.DefaultClient)
	if sdkhttp.GuardDrain(d) != d {
		t.Error("GuardDrain of a drain-guarded client wrapped it again")
	}
	if up := sdkhttp.Guard(d); up != g {
		t.Errorf("Guard of a drain-guarded client is %#v, want %#v (the inner client, guarded)", up, g)
	}
	for _, c := range []sdkhttp.Doer{g, d} {
		if inner, ok := sdkhttp.Unwrap(c); !ok || inner != http.DefaultClient {
			t.Errorf("Unwrap(%#v) = %#v, %v", c, inner, ok)
		}
	}
	if sdkhttp.Guard(nil) != nil || sdkhttp.GuardDrain(nil) != nil {
		t.Error("Guard(nil) or GuardDrain(nil) is not nil")
	}
}

// writeCounter counts the writes of the connections it wraps.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestGuardWritesOnce: Guard writes each request, headers and body, in one
// write; the SDK's own body (unguarded, or GuardDrain) takes two, as
// net/http flushes the headers of a body it does not know is in memory
// before it writes the body. The server gets the same body every way.
func TestGuardWritesOnce(t *testing.T) {
	var bodies []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"Successful":[{"Id":"0"}]}`))
	}))
	defer srv.Close()
	const calls = 10
	for _, g := range guards {
		var writes atomic.Int64
		client := sqsOnConn(srv, g.guard, func(conn net.Conn) net.Conn { return writeCounter{Conn: conn, writes: &writes} })
		for i := range calls {
			in := &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(srv.URL + "/000000000000/q"), Entries: []types.DeleteMessageBatchRequestEntry{
				{Id: aws.String("0"), ReceiptHandle: aws.String(strings.Repeat("h", 300) + strconv.Itoa(i))}}}
			if _, err := client.DeleteMessageBatch(context.Background(), in); err != nil {
				t.Fatalf("%s: DeleteMessageBatch: %v", g.name, err)
			}
		}
		want := int64(2 * calls)
		if g.name == "Guard" {
			want = calls
		}
		t.Logf("%s: %d calls, %d writes", g.name, calls, writes.Load())
		if writes.Load() != want {
			t.Errorf("%s: %d writes for %d calls, want %d", g.name, writes.Load(), calls, want)
		}
	}
	for i := range bodies {
		if !strings.Contains(bodies[i], strings.Repeat("h", 300)+strconv.Itoa(i%calls)+`"`) {
			t.Errorf("request %d reached the server as %q", i, bodies[i])
		}
	}
}
