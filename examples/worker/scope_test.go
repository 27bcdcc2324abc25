package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestMetricsWithoutScopeLabels: every series on /metrics is named by the
// metric and its own attributes only. The OTel Prometheus exporter adds
// otel_scope_name, otel_scope_version and otel_scope_schema_url to every
// series unless told not to: three labels on each, the same on all.
func TestMetricsWithoutScopeLabels(t *testing.T) {
	client := testenv.SQS(t)
	url, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"order_id":"o-1","amount":1}`)}); err != nil {
		t.Fatal(err)
	}
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
	var page string
	for {
		_, page = get(t, base+"/metrics")
		if settledCount(page, "ack") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics 30s after start: no ack counted\n%s", page)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for line := range strings.Lines(page) {
		if !strings.HasPrefix(line, "#") && strings.Contains(line, "otel_scope_") {
			t.Errorf("/metrics series carries the exporter's scope labels: %s", strings.TrimSpace(line))
			break
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d; logs:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30s of its context being cancelled")
	}
}
