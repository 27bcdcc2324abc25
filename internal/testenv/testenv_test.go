package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// verdictTB records how a helper ended a test: Fatalf and Skipf stop the
// goroutine, as testing.T's do. Only the methods the helpers call are
// implemented; the embedded nil TB makes any other call panic.
type verdictTB struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (v *verdictTB) Helper() {}

func (v *verdictTB) Fatalf(format string, args ...any) {
	v.failed, v.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (v *verdictTB) Skipf(format string, args ...any) {
	v.skipped, v.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Cleanup is not needed by the helpers under test; it must not be called.
func (v *verdictTB) Cleanup(func()) { panic("unexpected Cleanup") }

// outcome runs fn with a verdictTB on its own goroutine and returns
// "run", "skip" or "fail" with the message.
func outcome(fn func(testing.TB)) (string, string) {
	v := &verdictTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(v)
	}()
	<-done
	switch {
	case v.failed:
		return "fail", v.msg
	case v.skipped:
		return "skip", v.msg
	}
	return "run", ""
}

// attributesFunc fakes GetQueueAttributes.
type attributesFunc func() (map[string]string, error)

func (f attributesFunc) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	attrs, err := f()
	if err != nil {
		return nil, err
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

// TestCountIsStrict: a count the answer lacks or that is not a number is an
// error, never 0, so a "queue empty" check cannot pass without checking.
func TestCountIsStrict(t *testing.T) {
	t.Parallel()
	const vis, nv = "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"
	for _, tc := range []struct {
		name    string
		attrs   map[string]string
		err     error
		want    string // "" for no error
		visible int
		flight  int
	}{
		{name: "both", attrs: map[string]string{vis: "3", nv: "4"}, visible: 3, flight: 4},
		{name: "zero", attrs: map[string]string{vis: "0", nv: "0"}},
		{name: "no attributes", attrs: nil, want: vis + " missing"},
		{name: "no in-flight count", attrs: map[string]string{vis: "0"}, want: nv + " missing"},
		{name: "empty value", attrs: map[string]string{vis: "", nv: "0"}, want: `ApproximateNumberOfMessages="" is not a count`},
		{name: "not a number", attrs: map[string]string{vis: "0", nv: "many"}, want: `="many" is not a count`},
		{name: "negative", attrs: map[string]string{vis: "-1", nv: "0"}, want: "is not a count"},
		{name: "call fails", err: errors.New("boom"), want: "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := attributesFunc(func() (map[string]string, error) { return tc.attrs, tc.err })
			v, f, err := testenv.Counts(context.Background(), client, "q")
			if tc.want == "" {
				if err != nil || v != tc.visible || f != tc.flight {
					t.Fatalf("Counts = %d, %d, %v; want %d, %d, nil", v, f, err, tc.visible, tc.flight)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Counts = %d, %d, %v; want an error containing %q", v, f, err, tc.want)
			}
			if got, msg := outcome(func(tb testing.TB) { testenv.Count(tb, client, "q") }); got != "fail" || !strings.Contains(msg, tc.want) {
				t.Fatalf("Count: %s %q, want the test failed with %q", got, msg, tc.want)
			}
		})
	}
}

// TestSkipRule: a test skips only when a variable it needs is unset and
// SQSONCE_INTEGRATION is not 1; a set variable must name a reachable server.
func TestSkipRule(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	up := srv.URL
	for _, tc := range []struct {
		name                string
		integration         string
		sqs, ddb, moveTask  string
		config, moveTaskOut string // "run", "skip" or "fail"
	}{
		{"nothing set", "", "", "", "", "skip", "skip"},
		{"nothing set, integration", "1", "", "", "", "fail", "fail"},
		{"one set", "", up, "", "", "skip", "skip"},
		{"all set", "", up, up, up, "run", "run"},
		{"all set, integration", "1", up, up, up, "run", "run"},
		{"unreachable", "", dead, up, up, "fail", "fail"},
		{"not a URL", "", "localhost", up, up, "fail", "fail"},
		{"move task unset", "", up, up, "", "run", "skip"},
		{"move task unset, integration", "1", up, up, "", "run", "fail"},
		{"move task unreachable", "", up, up, dead, "run", "fail"},
		// make test-unit unsets the SQS and DynamoDB variables only.
		{"only the move task set", "", "", "", dead, "skip", "skip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SQSONCE_INTEGRATION", tc.integration)
			t.Setenv("AWS_ENDPOINT_URL_SQS", tc.sqs)
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", tc.ddb)
			t.Setenv("SQSONCE_MOVE_TASK_ENDPOINT", tc.moveTask)
			t.Setenv("AWS_REGION", "us-east-1")
			if got, msg := outcome(func(tb testing.TB) { testenv.Config(tb) }); got != tc.config {
				t.Errorf("Config: %s (%s), want %s", got, msg, tc.config)
			}
			if got, msg := outcome(func(tb testing.TB) { testenv.MoveTaskSQS(tb) }); got != tc.moveTaskOut {
				t.Errorf("MoveTaskSQS: %s (%s), want %s", got, msg, tc.moveTaskOut)
			}
		})
	}
}
