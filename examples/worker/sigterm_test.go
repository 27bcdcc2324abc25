package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// claimGate sits between the worker and DynamoDB and holds every dedupe
// claim (PutItem) until it is opened: a handler blocked there is a slow
// handler, running when SIGTERM comes. Other calls pass through.
type claimGate struct {
	proxy *httputil.ReverseProxy
	held  atomic.Int32
	open  chan struct{}
	once  sync.Once
}

// newClaimGate starts a gate in front of the stack's DynamoDB and returns
// it with its endpoint.
func newClaimGate(t *testing.T) (*claimGate, string) {
	t.Helper()
	target, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	if err != nil {
		t.Fatal(err)
	}
	g := &claimGate{proxy: httputil.NewSingleHostReverseProxy(target), open: make(chan struct{})}
	// A call the worker abandons when it exits is expected here.
	g.proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := httptest.NewServer(g)
	t.Cleanup(func() { g.release(); srv.Close() })
	return g, srv.URL
}

func (g *claimGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutItem") {
		g.held.Add(1)
		select {
		case <-g.open:
		case <-r.Context().Done(): // the worker gave up the call
			return
		}
	}
	g.proxy.ServeHTTP(w, r)
}

func (g *claimGate) release() { g.once.Do(func() { close(g.open) }) }

// buildWorker builds the worker binary once per test binary.
var buildWorker = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sqsonce-worker-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// TestSIGTERMWithHandlersRunning sends SIGTERM to the built binary, as ECS
// stops a task, while two handlers are running (held inside their dedupe
// claim) and more messages wait. Every message must end either handled
// once and deleted, or visible again at once; none deleted unhandled, none
// left in flight. With time to finish, the running handlers complete; cut
// short by the shutdown timeout, they are cancelled and released.
func TestSIGTERMWithHandlersRunning(t *testing.T) {
	bin, err := buildWorker()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	for _, tc := range []struct {
		name     string
		shutdown string
		finish   bool // open the gate once the worker drains
	}{
		{"running handlers finish", "30s", true},
		{"running handlers cut short", "2s", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := testenv.SQS(t)
			url, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 60})
			table := testenv.Table(t, testenv.Dynamo(t), testenv.Prefix(t), "pk", "")
			gate, endpoint := newClaimGate(t)

			const n = 8
			sent := map[string]bool{}
			for i := range n {
				out, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
					QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprintf(`{"order_id":"o-%d"}`, i)),
				})
				if err != nil {
					t.Fatal(err)
				}
				sent[aws.ToString(out.MessageId)] = true
			}

			var stderr syncBuffer
			cmd := exec.Command(bin, "-log-level", "debug", "-shutdown-timeout", tc.shutdown)
			cmd.Env = append(os.Environ(), "QUEUE_URL="+url, "CONCURRENCY=2", "DEDUPE_TABLE="+table, "AWS_ENDPOINT_URL_DYNAMODB="+endpoint)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
					<-exited
				}
			})

			waitUntil(t, 60*time.Second, "two handlers running", &stderr, func() bool { return gate.held.Load() >= 2 })
			_, inFlight, err := testenv.Counts(context.Background(), client, url)
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if tc.finish {
				// Let the running handlers go on only once the worker has
				// stopped receiving, so that what it finishes is what it
				// held at SIGTERM.
				waitUntil(t, 30*time.Second, "the drain to begin", &stderr, func() bool {
					return strings.Contains(stderr.String(), `"msg":"consumer draining"`)
				})
				gate.release()
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("worker exited with %v after SIGTERM; logs:\n%s", err, stderr.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("worker still running 60s after SIGTERM; logs:\n%s", stderr.String())
			}
			logs := stderr.String()

			outcomes := settled(t, logs)
			handled := handledCount(t, logs)
			var acked []string
			released := 0
			for id, o := range outcomes {
				switch o {
				case "ack":
					acked = append(acked, id)
				case "release":
					released++
				default:
					t.Errorf("message %s settled %q; want ack or release", id, o)
				}
			}
			for id := range sent {
				want := 0
				if outcomes[id] == "ack" {
					want = 1
				}
				if handled[id] != want {
					t.Errorf("message %s (%q) handled %d times, want %d", id, outcomes[id], handled[id], want)
				}
			}
			switch {
			case tc.finish && (len(acked) != 2 || !strings.Contains(logs, `"msg":"worker drained"`)):
				t.Errorf("%d acked, want the 2 handlers running at SIGTERM finished and a drained worker; logs:\n%s", len(acked), logs)
			case !tc.finish && (len(acked) != 0 || released < 2 || !strings.Contains(logs, `"msg":"consumer: shutdown timeout: cancelling running handlers"`)):
				t.Errorf("%d acked, %d released; want none acked, the running handlers cancelled at the shutdown timeout and released; logs:\n%s", len(acked), released, logs)
			}

			// Nothing in flight: everything not acked is visible again now,
			// long before the 60 s visibility timeout.
			visible, inFlightAfter := testenv.Count(t, client, url)
			if inFlightAfter != 0 || visible != n-len(acked) {
				t.Fatalf("after exit: %d visible, %d in flight; want %d visible, 0 in flight", visible, inFlightAfter, n-len(acked))
			}
			var left []string
			for _, m := range testenv.Receive(t, client, url, n-len(acked), true) {
				left = append(left, aws.ToString(m.MessageId))
			}
			all := append(left, acked...)
			slices.Sort(all)
			if len(slices.Compact(all)) != n || len(all) != n {
				t.Fatalf("acked %v and left in the queue %v: want each of the %d messages sent in exactly one", acked, left, n)
			}
			for _, id := range all {
				if !sent[id] {
					t.Fatalf("message %s was never sent", id)
				}
			}
			t.Logf("SIGTERM with %d in flight (2 handlers running): %d finished and deleted, %d released; %d visible again", inFlight, len(acked), released, len(left))
		})
	}
}

// waitUntil polls cond every 50 ms, failing the test with the worker's logs
// after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, logs *syncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; logs:\n%s", timeout, what, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// handledCount counts the handler's "order handled" lines by message id.
func handledCount(t *testing.T, logs string) map[string]int {
	t.Helper()
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line struct {
			Msg       string `json:"msg"`
			MessageID string `json:"message_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if line.Msg == "order handled" {
			out[line.MessageID]++
		}
	}
	return out
}
