package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// lockedBuffer is a bytes.Buffer safe for the ui's logger and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUI checks `sqs-redrive ui`: its first line is the console's URL on
// loopback with the token; the console needs that token; -read-only
// refuses actions; each action is logged on stderr without a body; and it
// stops, exit code 0, when its context ends (SIGINT or SIGTERM).
func TestUI(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, src, 3, "permanent")
	for _, readOnly := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		var stderr lockedBuffer
		args := []string{"ui", "-queue-prefix", testenv.Prefix(t), "-backup-dir", t.TempDir()}
		if readOnly {
			args = append(args, "-read-only")
		}
		done := make(chan int, 1)
		go func() {
			code := run(ctx, args, strings.NewReader(""), pw, &stderr)
			pw.Close()
			done <- code
		}()
		first, err := bufio.NewReader(pr).ReadString('\n')
		if err != nil {
			cancel()
			t.Fatalf("no first line: %v (stderr %s, exit %d)", err, stderr.String(), <-done)
		}
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		m := regexp.MustCompile(`^console on (http://127\.0\.0\.1:\d+)/\?token=([0-9a-f]{64})\n$`).FindStringSubmatch(first)
		if m == nil {
			cancel()
			<-done
			t.Fatalf("first line %q", first)
		}
		base, token := m[1], m[2]
		get := func(path, tok string) (int, string) {
			req, _ := http.NewRequest("GET", base+path, nil)
			if tok != "" {
				req.Header.Set("X-Console-Token", tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, _ := get("/", ""); code != http.StatusUnauthorized {
			t.Errorf("without the token: %d", code)
		}
		code, page := get("/dlq/"+name(dlq), token)
		if code != http.StatusOK || !strings.Contains(page, `<b id="read-count">3</b>`) {
			t.Fatalf("DLQ page: %d\n%s", code, page)
		}
		csrf := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)">`).FindStringSubmatch(page)
		req, _ := http.NewRequest("POST", base+"/dlq/"+name(dlq)+"/plan", strings.NewReader("csrf="+csrf[1]))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Console-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusOK
		if readOnly {
			want = http.StatusForbidden
		}
		if resp.StatusCode != want {
			t.Errorf("read-only %v: dry run %d, want %d", readOnly, resp.StatusCode, want)
		}
		http.DefaultClient.CloseIdleConnections()
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		logs := stderr.String()
		if !readOnly && (!strings.Contains(logs, `"action": "dry-run"`) || !strings.Contains(logs, `"count": 3`)) {
			t.Errorf("the dry run is not logged: %s", logs)
		}
		if strings.Contains(logs, `"n":`) || strings.Contains(logs, token) {
			t.Errorf("a body or the token in the log: %s", logs)
		}
		if count(t, client, dlq) != 3 || count(t, client, src) != 0 {
			t.Fatal("the ui moved something")
		}
	}
}
