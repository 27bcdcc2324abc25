package faults_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/internal/faults"
)

// TestSDKSeesTheInjectedFaults drives the real SDK client through the
// transport against a server that counts what reaches it: each kind of
// fault must surface as the SDK would see it from AWS.
func TestSDKSeesTheInjectedFaults(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"QueueUrls":[]}`))
	}))
	defer srv.Close()

	tr := faults.New(nil, faults.Config{ErrorRate: 1, Seed: 7})
	client := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   &http.Client{Transport: tr},
		Retryer:      aws.NopRetryer{},
	})
	codes := map[string]int{}
	for range 200 {
		_, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{})
		if err == nil {
			t.Fatal("a call succeeded with ErrorRate 1")
		}
		var api smithy.APIError
		switch {
		case errors.As(err, &api):
			codes[api.ErrorCode()]++
			if !retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool() {
				t.Errorf("the SDK would not retry %v", err)
			}
		case faults.IsInjected(err):
			codes["reset"]++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	for _, want := range []string{"InternalFailure", "ServiceUnavailable", "reset"} {
		if codes[want] == 0 {
			t.Errorf("no %s among %v", want, codes)
		}
	}
	if codes["RequestThrottled"]+codes["ThrottlingException"] == 0 {
		t.Errorf("no throttling error among %v", codes)
	}
	c := tr.Counts()
	if served.Load() != c[faults.KindResetAfter] {
		t.Errorf("server saw %d calls, want exactly the %d reset-after ones", served.Load(), c[faults.KindResetAfter])
	}
	if tr.Injected() != 200 {
		t.Errorf("injected %d faults in 200 calls", tr.Injected())
	}
}

func TestDisabledForwardsEverything(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tr := faults.New(nil, faults.Config{ErrorRate: 1})
	tr.SetEnabled(false)
	for range 20 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("disabled transport: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if tr.Injected() != 0 {
		t.Fatalf("injected %d faults while disabled", tr.Injected())
	}
}

// TestProxy drives the SDK through the loopback proxy: every kind of fault
// reaches the client, and the calls that pass get the server's answer.
func TestProxy(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"QueueUrls":["http://q/1"]}`))
	}))
	defer srv.Close()
	p, err := faults.Listen(srv.URL, faults.Config{ErrorRate: 0.5, DelayRate: 0.1, MaxDelay: 5 * time.Millisecond, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(p.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:      aws.NopRetryer{},
	})
	var ok, failed int
	for range 200 {
		out, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{})
		if err != nil {
			failed++
			continue
		}
		if len(out.QueueUrls) != 1 {
			t.Fatalf("answer through the proxy: %+v", out)
		}
		ok++
	}
	c := p.Counts()
	for _, k := range []string{faults.KindServerError, faults.KindUnavailable, faults.KindThrottle, faults.KindResetBefore, faults.KindResetAfter, faults.KindDelay} {
		if c[k] == 0 {
			t.Errorf("no %s fault among %v", k, c)
		}
	}
	if int64(failed) != p.Injected()-c[faults.KindDelay] || ok+failed != 200 {
		t.Errorf("ok %d, failed %d, injected %v", ok, failed, c)
	}
	if served.Load() != int64(ok)+c[faults.KindResetAfter] {
		t.Errorf("server saw %d calls; want %d passed + %d reset after", served.Load(), ok, c[faults.KindResetAfter])
	}
}
