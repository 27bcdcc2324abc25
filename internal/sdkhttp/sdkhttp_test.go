package sdkhttp_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// sqsOn is an SQS client on srv whose connections write late, counting
// the connections it opens.
func sqsOn(t *testing.T, srv *httptest.Server, dials *atomic.Int64, guard bool, late time.Duration) *sqs.Client {
	t.Helper()
	hc := testenv.WrappingHTTPClient(func(conn net.Conn) net.Conn {
		dials.Add(1)
		return testenv.LateConn{Conn: conn, Late: late}
	})
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   hc,
	}, func(o *sqs.Options) {
		if guard {
			o.HTTPClient = sdkhttp.Guard(o.HTTPClient)
		}
	})
}

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
	for _, guard := range []bool{false, true} {
		var dials atomic.Int64
		client := sqsOn(t, srv, &dials, guard, 5*time.Millisecond)
		for range calls {
			if _, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/000000000000/q")}); err != nil {
				t.Fatalf("guard %v: ReceiveMessage: %v", guard, err)
			}
		}
		t.Logf("guard %v: %d calls, %d connections", guard, calls, dials.Load())
		switch {
		case guard && dials.Load() != 1:
			t.Errorf("guarded: %d connections for %d calls one after another, want 1", dials.Load(), calls)
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
	for _, guard := range []bool{false, true} {
		requests.Store(0)
		var dials atomic.Int64
		client := sqsOn(t, srv, &dials, guard, 2*time.Millisecond)
		var failed int
		for range calls {
			if _, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.URL + "/000000000000/q")}); err != nil {
				failed++
			}
		}
		t.Logf("guard %v: %d calls, %d requests, %d failed", guard, calls, requests.Load(), failed)
		switch {
		case guard && (requests.Load() != calls || failed > 0):
			t.Errorf("guarded: %d requests (%d calls failed) for %d calls, want one each", requests.Load(), failed, calls)
		case !guard && requests.Load() == calls:
			t.Errorf("unguarded: one request per call: the race this guards against did not happen")
		}
	}
}

func TestGuardOnce(t *testing.T) {
	g := sdkhttp.Guard(http.DefaultClient)
	if sdkhttp.Guard(g) != g {
		t.Error("Guard of a guarded client wrapped it again")
	}
	if sdkhttp.Guard(nil) != nil {
		t.Error("Guard(nil) is not nil")
	}
}
