package consumer_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// countedConn counts its Close in closed.
type countedConn struct {
	net.Conn
	closed *atomic.Int64
	once   atomic.Bool
}

func (c *countedConn) Close() error {
	if c.once.CompareAndSwap(false, true) {
		c.closed.Add(1)
	}
	return c.Conn.Close()
}

// TestConnectionsKept: a consumer on an *sqs.Client with the SDK's own HTTP
// client, wrapped as users wrap clients, drains a backlog at Concurrency
// 32 on about as many connections as it makes calls at once. The SDK keeps
// 10 idle connections per host, fewer than the consumer's calls at once,
// and closed the connection of most calls beyond them, so each needed a
// new one (a TLS handshake, on AWS): about 12 per 1,000 messages here.
// No connection is closed while the consumer runs, also when every
// request's writer runs late ("late": writes return 5 ms late): unguarded
// (sdkhttp), net/http closed 3 to 5 per run here, and then the connection
// of nearly every call, each under a call whose response could be lost.
func TestConnectionsKept(t *testing.T) {
	t.Parallel()
	for _, late := range []time.Duration{0, 5 * time.Millisecond} {
		name := "prompt"
		if late > 0 {
			name = "late"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			connectionsKept(t, late)
		})
	}
}

func connectionsKept(t *testing.T, late time.Duration) {
	var dials, closed atomic.Int64
	client := sqs.NewFromConfig(testenv.Config(t), func(o *sqs.Options) {
		o.HTTPClient = testenv.WrappingHTTPClient(func(conn net.Conn) net.Conn {
			dials.Add(1)
			if late > 0 {
				conn = testenv.LateConn{Conn: conn, Late: late}
			}
			return &countedConn{Conn: conn, closed: &closed}
		})
	})
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	n := 8000
	if late > 0 {
		n = 2000
	}
	sendN(t, client, queueURL, n, nil)

	var handled atomic.Int64
	c, err := consumer.New(consumer.Config{
		Client:      &countingClient{SQSAPI: client},
		QueueURL:    queueURL,
		Concurrency: 32,
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			handled.Add(1)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	dials0, closed0 := dials.Load(), closed.Load()
	stop := runConsumer(t, c)
	waitFor(t, 60*time.Second, "every message handled", func() bool { return handled.Load() >= int64(n) })
	dialed, closedRunning := dials.Load()-dials0, closed.Load()-closed0
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("%d messages: %d connections opened, %d closed while running", n, dialed, closedRunning)
	// About 21 calls at once at Concurrency 32.
	if dialed > 40 {
		t.Errorf("%d connections opened for %d messages (%d closed while running): want the pool to keep them", dialed, n, closedRunning)
	}
	// A few closes can be the pool's own: when more calls overlap than it
	// keeps idle (a receive that outlived its long poll stops counting, see
	// pollers), the extra connection is closed when it comes back. Under
	// -race on a loaded machine that closed 2 of 18. Without the guard,
	// hundreds close (395 of 407 when last checked).
	if closedRunning > 3 {
		t.Errorf("%d connections closed while running: want every call's connection kept (sdkhttp.Guard)", closedRunning)
	}
}
