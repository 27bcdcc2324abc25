package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestReadyzWhileReceivesFail (issue 42, defect 11): the worker's queue is
// deleted while it runs. /readyz, 200 until then, answers 503 with SQS's
// error while every receive fails, before the consumer gives up.
func TestReadyzWhileReceivesFail(t *testing.T) {
	client := testenv.SQS(t)
	url, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := map[string]string{"QUEUE_URL": url, "HTTP_ADDR": "127.0.0.1:0"}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, nil, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
	}()
	addr := regexp.MustCompile(`"http_addr":"([^"]+)"`)
	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("the worker did not log its HTTP address:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	readyz := func() (int, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for code, _ := readyz(); code != http.StatusOK; code, _ = readyz() {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d after start-up, want 200", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body := readyz()
		if code == http.StatusServiceUnavailable && (strings.Contains(body, "QueueDoesNotExist") || strings.Contains(body, "NonExistentQueue")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30s after the queue was deleted: %d %q, want 503 naming QueueDoesNotExist", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30s of its context being cancelled")
	}
}
