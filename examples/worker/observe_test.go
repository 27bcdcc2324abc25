package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// settledCount reads sqsonce_messages_settled_total for one outcome from a
// Prometheus text page.
func settledCount(page, outcome string) int {
	re := regexp.MustCompile(`(?m)^sqsonce_messages_settled_total\{[^}]*sqsonce_outcome="` + outcome + `"[^}]*\} (\d+)`)
	total := 0
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}

// The built worker serves /metrics with the settled counts of a run, is
// ready after start-up, and turns not ready as soon as SIGTERM arrives,
// while its slow handlers are still draining.
func TestMetricsAndReadiness(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for i := range 6 {
		body := fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i)
		if i >= 4 {
			body = "not an order"
		}
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-queue-url", queueURL, "-http-addr", "127.0.0.1:0", "-handler-delay", "300ms", "-concurrency", "4", "-shutdown-timeout", "20s")
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["http_addr"] != nil {
				addr <- fmt.Sprint(line["http_addr"])
			}
		}
		done <- cmd.Wait()
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not log its HTTP address")
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d", code)
	}
	deadline := time.Now().Add(time.Minute)
	var page string
	for time.Now().Before(deadline) {
		_, page = get(t, base+"/metrics")
		if settledCount(page, "ack") == 4 && settledCount(page, "dead_letter") == 2 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if settledCount(page, "ack") != 4 || settledCount(page, "dead_letter") != 2 {
		t.Fatalf("/metrics after the run: ack %d, dead_letter %d; want 4 and 2\n%s", settledCount(page, "ack"), settledCount(page, "dead_letter"), page)
	}
	for _, name := range []string{"messaging_client_consumed_messages_total", "messaging_process_duration_seconds", "sqsonce_sqs_calls_total", "sqsonce_dead_letters_total"} {
		if !strings.Contains(page, name) {
			t.Fatalf("/metrics lacks %s", name)
		}
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d while running, want 200", code)
	}

	// Slow handlers in flight, then SIGTERM: not ready before the drain ends.
	for i := range 4 {
		body := fmt.Sprintf(`{"order_id":"late-%d","amount":1}`, i)
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	for time.Now().Before(deadline) {
		if _, p := get(t, base+"/metrics"); regexp.MustCompile(`(?m)^sqsonce_messages_in_flight\{[^}]*\} [1-9]`).MatchString(p) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawNotReady := false
	for !sawNotReady {
		select {
		case err := <-done:
			t.Fatalf("the worker exited (%v) before /readyz answered 503", err)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain: %v", err)
		}
		resp.Body.Close()
		sawNotReady = resp.StatusCode == http.StatusServiceUnavailable
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not exit within 30 s of SIGTERM")
	}
}
