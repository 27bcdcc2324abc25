package opshttp_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/opshttp"
)

// onFake returns a fake SQS with a queue and its dead-letter queue.
func onFake() (*sqsfake.Fake, string) {
	f := sqsfake.New()
	f.AddQueue("orders-dlq", nil)
	return f, f.AddQueue("orders", map[string]string{
		"VisibilityTimeout": "30",
		"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
}

// /readyz follows a consumer through its life: not ready before Run has
// passed its start-up checks, ready while it receives, not ready while
// its receives fail (SQS's reason shown escaped), ready again once one
// succeeds, not ready from the cancellation of Run's context while a
// handler still runs, and not ready after Run returned. A second consumer
// of the process that is ready does not make the first one's 503 a 200.
func TestReadyzFollowsConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q := onFake()
		var deny atomic.Bool
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ReceiveMessage" && deny.Load() {
				return sqsfake.Fault{Err: &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized\nready\x1b[2J"}}
			}
			return sqsfake.Fault{}
		})
		started, release := make(chan struct{}), make(chan struct{})
		c, err := consumer.New(consumer.Config{
			Client: f, QueueURL: q, WaitTime: time.Second,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				close(started)
				<-release // runs on through the drain
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		// Another consumer of the process, always ready.
		other := opshttp.ReadyFunc(func() error { return nil })
		mux := newMux(t, opshttp.Config{Ready: []opshttp.Readier{other, c}})
		readyz := func(when string, wantCode int, wantIn string) {
			t.Helper()
			code, body, _ := serve(t, mux, http.MethodGet, "/readyz")
			if code != wantCode || !strings.Contains(body, wantIn) {
				t.Errorf("/readyz %s: %d %q, want %d with %q", when, code, body, wantCode, wantIn)
			}
			if strings.Count(body, "\n") != 1 {
				t.Errorf("/readyz %s: %q, want one line", when, body)
			}
		}

		readyz("before Run", http.StatusServiceUnavailable, "not ready: consumer: not running")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx) }()
		time.Sleep(2 * time.Second)
		readyz("while receiving", http.StatusOK, "ready")

		deny.Store(true)
		time.Sleep(10 * time.Second) // less than the ReceiveErrorGrace: Run goes on
		readyz("while receives fail", http.StatusServiceUnavailable, `AccessDenied: not authorized\nready\x1b[2J`)
		deny.Store(false)
		time.Sleep(10 * time.Second)
		readyz("once receives succeed again", http.StatusOK, "ready")

		if _, err := f.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("o-1")}); err != nil {
			t.Fatal(err)
		}
		<-started
		cancel() // SIGTERM
		synctest.Wait()
		readyz("while the drain waits for a handler", http.StatusServiceUnavailable, "not ready: consumer: draining")
		close(release)
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v", err)
		}
		readyz("after Run returned", http.StatusServiceUnavailable, "not ready: consumer: not running")
	})
}
