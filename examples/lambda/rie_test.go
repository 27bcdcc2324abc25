//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/sqslambda/sqslambdatest"
)

// rie is AWS's Lambda Runtime Interface Emulator, built by the test from
// the Go module proxy. The module publishes no tagged version: this is a
// pseudo-version of its main branch. It is not a dependency of this
// module (go.mod does not name it), and it runs on Linux only.
const rie = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d"

// buildRIE builds the function as bootstrap and the emulator into dir.
// When the emulator cannot be built (no module proxy), the test fails
// under SQSONCE_INTEGRATION=1 and skips otherwise.
func buildRIE(t *testing.T, dir string) (emulator, bootstrap string) {
	t.Helper()
	bootstrap = filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-o", bootstrap, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -o bootstrap: %v\n%s", err, out)
	}
	install := exec.Command("go", "install", rie)
	install.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := install.CombinedOutput(); err != nil {
		if testenv.Required() {
			t.Fatalf("SQSONCE_INTEGRATION=1 but the Runtime Interface Emulator cannot be built (`go install %s`): %v\n%s", rie, err, out)
		}
		t.Skipf("the Runtime Interface Emulator cannot be built (`go install %s`): %v\n%s", rie, err, out)
	}
	return filepath.Join(dir, "aws-lambda-rie"), bootstrap
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// emulator is the function running under the Runtime Interface Emulator.
type emulator struct {
	url  string // the invocations endpoint
	cmd  *exec.Cmd
	out  bytes.Buffer // the emulator's and the function's output; read after stop
	http *http.Client
}

// startRIE runs bootstrap under the emulator on loopback ports, with the
// test's environment and env added.
func startRIE(t *testing.T, emulatorPath, bootstrap string, env map[string]string) *emulator {
	t.Helper()
	addr, api := freeAddr(t), freeAddr(t)
	e := &emulator{
		url:  "http://" + addr + "/2015-03-31/functions/function/invocations",
		http: &http.Client{Transport: &http.Transport{}},
	}
	e.cmd = exec.Command(emulatorPath, "--runtime-interface-emulator-address", addr, "--runtime-api-address", api, bootstrap)
	e.cmd.Dir = filepath.Dir(bootstrap)
	e.cmd.Env = os.Environ()
	for k, v := range env {
		e.cmd.Env = append(e.cmd.Env, k+"="+v)
	}
	e.cmd.Stdout, e.cmd.Stderr = &e.out, &e.out
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the function runs in its group
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("start the emulator: %v", err)
	}
	t.Cleanup(e.stop)
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			e.stop()
			t.Fatalf("the emulator does not listen on %s: %v\n%s", addr, err, e.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return e
}

// stop kills the emulator and the function (its process group) and waits.
func (e *emulator) stop() {
	if e.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	_ = e.cmd.Wait()
	e.http.CloseIdleConnections()
}

// invoke posts the event to the emulator, as the Invoke API would, and
// decodes the partial batch response. A function error (the runtime's
// errorType/errorMessage body) is returned as an error.
func (e *emulator) invoke(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("invoke: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return events.SQSEventResponse{}, fmt.Errorf("invoke: the emulator answered %s: %q", resp.Status, b)
	}
	var fnErr struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	if json.Unmarshal(b, &fnErr) == nil && fnErr.Type != "" {
		return events.SQSEventResponse{}, fmt.Errorf("function error %s: %s", fnErr.Type, fnErr.Message)
	}
	var out events.SQSEventResponse
	if err := json.Unmarshal(b, &out); err != nil {
		return events.SQSEventResponse{}, fmt.Errorf("invoke: the answer %q is not a partial batch response: %w", b, err)
	}
	return out, nil
}

// The example built as bootstrap and run under AWS's Lambda Runtime
// Interface Emulator, as the README describes, invoked with the events the
// mapping's stand-in builds from the local stack's queue: the order is
// handled once (its duplicate acked), the malformed one is dead-lettered
// by sqsonce and reported as a success, and the mapping deletes all three.
func TestFunctionUnderRIE(t *testing.T) {
	s := newStack(t)
	if testing.Short() && !testenv.Required() {
		t.Skip("builds the function and the emulator: not with -short")
	}
	emulatorPath, bootstrap := buildRIE(t, t.TempDir())
	e := startRIE(t, emulatorPath, bootstrap, s.env)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := map[string]string{}
	ids[s.send(t, `{"order_id":"o-1","amount":3}`, "job-1")] = "o-1"
	ids[s.send(t, `{"amount":4}`, "")] = "malformed"
	ids[s.send(t, `{"order_id":"o-1","amount":3}`, "job-1")] = "o-1 again"

	esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{
		Client: s.client, QueueURL: s.url, HandleFunc: e.invoke, FunctionTimeout: functionTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	results, err := esm.Drain(ctx)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	deleted := map[string]int{}
	for i, r := range results {
		if r.Err != nil || len(r.Failed) != 0 {
			t.Errorf("invocation %d: failed %v, whole batch: %v", i, r.Failed, r.Err)
		}
		for _, id := range r.Deleted {
			deleted[ids[id]]++
		}
	}
	if len(deleted) != 3 || deleted["o-1"] != 1 || deleted["malformed"] != 1 || deleted["o-1 again"] != 1 {
		t.Errorf("deleted %v, want each of the three once", deleted)
	}
	dead := testenv.Receive(t, s.client, s.dlq, 1, true)
	if f, ok := deadletter.ParseFailure(dead[0].MessageAttributes); aws.ToString(dead[0].Body) != `{"amount":4}` || !ok || f.Class != "permanent" {
		t.Errorf("dead letter %q with failure %+v, want the malformed order, permanent", aws.ToString(dead[0].Body), f)
	}

	e.stop()
	logs := e.out.String()
	if !strings.Contains(logs, "START RequestId:") {
		t.Errorf("the emulator logged no invocation:\n%s", logs)
	}
	if got := handledOrders(t, logs); len(got) != 1 || got["o-1"] != 1 {
		t.Errorf("orders handled %v, want o-1 once; output:\n%s", got, logs)
	}
}
