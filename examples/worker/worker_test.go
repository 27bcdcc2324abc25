package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// settled returns the outcome of each "settled" log line, by message id.
func settled(t *testing.T, logs string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if line["msg"] == consumer.SettledMessage {
			out[fmt.Sprint(line["message_id"])] = fmt.Sprint(line["outcome"])
		}
	}
	return out
}

func TestWorkerDrainsOnCancel(t *testing.T) {
	client := testenv.SQS(t)
	url, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	ids := map[string]string{}
	for i, body := range []string{`{"order_id":"o-1","amount":5}`, `{"order_id":"o-2"}`, `{"order_id":"o-3","amount":7}`, `not json`} {
		out, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
		if err != nil {
			t.Fatal(err)
		}
		ids[aws.ToString(out.MessageId)] = []string{"ack", "ack", "ack", "dead_letter"}[i]
	}

	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := map[string]string{"QUEUE_URL": url, "CONCURRENCY": "2", "LOG_LEVEL": "debug"}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-shutdown-timeout", "5s"}, func(k string) string { return env[k] }, &bytes.Buffer{}, &stderr)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for len(settled(t, stderr.String())) < len(ids) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	cancel() // what SIGTERM does
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exited %d; logs:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not drain within 30s of its context being cancelled")
	}

	got := settled(t, stderr.String())
	for id, want := range ids {
		if got[id] != want {
			t.Errorf("message %s settled %q, want %q", id, got[id], want)
		}
	}
	if visible, inFlight := testenv.Count(t, client, url); visible != 0 || inFlight != 0 {
		t.Errorf("queue: %d visible, %d in flight; want every message deleted", visible, inFlight)
	}
	if visible, _ := testenv.Count(t, client, dlq); visible != 1 {
		t.Errorf("DLQ holds %d messages, want the malformed one", visible)
	}
	if !strings.Contains(stderr.String(), `"msg":"worker drained"`) {
		t.Errorf("no drain line in the logs:\n%s", stderr.String())
	}
}

func TestSettings(t *testing.T) {
	env := map[string]string{"QUEUE_NAME": "orders", "CONCURRENCY": "4", "VISIBILITY": "45s", "DEDUPE_TABLE": "d"}
	getenv := func(k string) string { return env[k] }
	s, err := parseSettings([]string{"-concurrency", "8"}, getenv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if s.queueName != "orders" || s.concurrency != 8 || s.visibility != 45*time.Second || s.dedupeTable != "d" || s.shutdownTimeout != consumer.DefaultShutdownTimeout {
		t.Errorf("settings = %+v (flags win over the environment, which wins over defaults)", s)
	}
	for _, bad := range []struct {
		args []string
		env  map[string]string
	}{
		{nil, map[string]string{}},
		{nil, map[string]string{"QUEUE_NAME": "q", "CONCURRENCY": "many"}},
		{[]string{"-log-level", "loud"}, map[string]string{"QUEUE_NAME": "q"}},
		{[]string{"-concurrency", "0"}, map[string]string{"QUEUE_NAME": "q"}},
	} {
		if code := run(context.Background(), bad.args, func(k string) string { return bad.env[k] }, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
			t.Errorf("run(%v, %v) = %d, want 2", bad.args, bad.env, code)
		}
	}
}
