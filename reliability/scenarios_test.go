package reliability

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/faults"
)

// Scenario 1: three workers; every ~2 s a random one gets SIGKILL and is
// restarted.
func TestCrashes(t *testing.T) {
	l := newLedger(t)
	sent := l.send(size(2000, 20000), 0.10, 0.01)
	args := []string{"-concurrency", "16", "-visibility", "4s"}
	workers := []*worker{l.startWorker(args...), l.startWorker(args...), l.startWorker(args...)}
	crashes := 0
	deadline := time.Now().Add(10 * time.Minute)
	for !l.status().Drained && time.Now().Before(deadline) {
		time.Sleep(time.Duration(1500+rand.IntN(1000)) * time.Millisecond)
		i := rand.IntN(len(workers))
		workers[i].kill()
		crashes++
		workers[i] = l.startWorker(args...)
	}
	l.waitDrained(2 * time.Minute)
	copies := l.check(sent)
	report(t, "%d messages (%d distinct credits, %d duplicates, %d malformed), %d crashes (SIGKILL), 0 faults; invariants hold: %v; extra DLQ copies from kills between DLQ send and delete: %d",
		sent.Messages, sent.Distinct, sent.Duplicates, sent.Malformed, crashes, !t.Failed(), copies)
}

// Scenario 2: a fault-injecting proxy in front of both servers: 500/503,
// throttling and connection resets on 10% of calls, 5% delayed by up to
// 2 s.
func TestFaults(t *testing.T) {
	l := newLedger(t)
	sent := l.send(size(1000, 5000), 0.10, 0.01)
	cfg := faults.Config{ErrorRate: 0.10, DelayRate: 0.05, MaxDelay: 2 * time.Second}
	sqsProxy, err := faults.Listen(os.Getenv("AWS_ENDPOINT_URL_SQS"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sqsProxy.Close()
	ddbProxy, err := faults.Listen(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ddbProxy.Close()
	l.env = withEnv(l.env, "AWS_ENDPOINT_URL_SQS="+sqsProxy.URL, "AWS_ENDPOINT_URL_DYNAMODB="+ddbProxy.URL)
	args := []string{"-concurrency", "16", "-visibility", "5s"}
	w1, w2 := l.startWorker(args...), l.startWorker(args...)
	l.waitDrained(10 * time.Minute)
	w1.kill()
	w2.kill()
	copies := l.check(sent)
	counts := func(p *faults.Proxy) string {
		return fmt.Sprintf("%d calls, %d faults %v", p.Calls(), p.Injected(), p.Counts())
	}
	report(t, "%d messages (%d distinct credits, %d malformed), 0 crashes; SQS: %s; DynamoDB: %s; invariants hold: %v; extra DLQ copies: %d",
		sent.Messages, sent.Distinct, sent.Malformed, counts(sqsProxy), counts(ddbProxy), !t.Failed(), copies)
	if sqsProxy.Injected() == 0 || ddbProxy.Injected() == 0 {
		t.Errorf("no faults were injected")
	}
}

// Scenario 3: handlers take 3× the visibility timeout: the heartbeat must
// hold every message, so every receive_count is 1 and nothing is doubled.
func TestSlowHandlers(t *testing.T) {
	l := newLedger(t)
	n := size(100, 1000)
	sent := l.send(n, 0, 0)
	// 4 s of visibility gives the heartbeat (every 1.3 s, extending what
	// runs out within two intervals) room for a slow call on a machine
	// busy with the rest of the test suite.
	w := l.startWorker("-concurrency", "100", "-visibility", "4s", "-handler-delay", "12s", "-log-level", "debug")
	l.waitDrained(5 * time.Minute)
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-w.wait(); err != nil {
		t.Errorf("worker exit: %v", err)
	}
	lines := settled(t, w)
	over := 0
	for _, s := range lines {
		if s.ReceiveCount != 1 {
			over++
		}
	}
	if len(lines) != n || over != 0 {
		t.Errorf("%d settled lines for %d messages, %d with receive_count > 1", len(lines), n, over)
	}
	l.check(sent)
	report(t, "%d messages, handler 12 s with visibility 4 s, 0 faults, 0 crashes; receive_count > 1: %d; invariants hold: %v", n, over, !t.Failed())
}

// Scenario 4: SIGTERM a worker with 100 messages in flight, then restart:
// none lost, none doubled, the drain finished within its timeout.
func TestShutdownUnderLoad(t *testing.T) {
	l := newLedger(t)
	sent := l.send(size(400, 2000), 0.10, 0.01)
	const shutdown = 10 * time.Second
	args := []string{"-concurrency", "100", "-handler-delay", "1500ms", "-visibility", "30s", "-shutdown-timeout", shutdown.String()}
	w := l.startWorker(args...)
	deadline := time.Now().Add(time.Minute)
	for l.status().InFlight < 100 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	inFlight := l.status().InFlight
	start := time.Now()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	err := <-w.wait()
	drain := time.Since(start)
	if err != nil {
		t.Errorf("worker exit after SIGTERM: %v", err)
	}
	if drain > shutdown+5*time.Second {
		t.Errorf("drain took %s, more than the shutdown timeout %s", drain, shutdown)
	}
	// Released messages are visible again at once: a new worker finishes
	// well before the 30 s visibility timeout would have brought them back.
	w2 := l.startWorker(args...)
	l.waitDrained(5 * time.Minute)
	w2.kill()
	l.check(sent)
	report(t, "%d messages, SIGTERM with %d in flight, drain %s (timeout %s), then restart; 0 faults; invariants hold: %v",
		sent.Messages, inFlight, drain.Round(time.Millisecond), shutdown, !t.Failed())
}

// Scenario 5: a corpus of malformed bodies and attributes. Each must be
// dead-lettered with a reason while the worker keeps going.
func TestBadInput(t *testing.T) {
	l := newLedger(t)
	str := func(v string) sqstypes.MessageAttributeValue {
		return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	tenAttrs := map[string]sqstypes.MessageAttributeValue{}
	for i := range 9 {
		tenAttrs[fmt.Sprintf("a%d", i)] = str("x")
	}
	tenAttrs["sqsonce-id"] = str("bad-ten-attributes")
	type badMsg struct {
		name  string
		body  string
		attrs map[string]sqstypes.MessageAttributeValue
	}
	big := `{"id":"bad-256k","account":"a","amount":"` + strings.Repeat("9", 256*1024-60) + `"}`
	corpus := []badMsg{
		{"256 KB body", big, nil},
		{"10 attributes already", `{"id":"bad-ten-attributes","account":"a","amount":1.5}`, tenAttrs},
		{"binary attribute, invalid UTF-8", `{"id":"bad-binary","amount":2}`, map[string]sqstypes.MessageAttributeValue{
			"raw": {DataType: aws.String("Binary"), BinaryValue: []byte{0xff, 0xfe, 0x00, 0x80}},
		}},
		{"wrong type: number id", `{"id":7,"account":"a","amount":1}`, map[string]sqstypes.MessageAttributeValue{"sqsonce-id": str("bad-number-id")}},
		{"wrong type: string amount", `{"id":"bad-string-amount","account":"a","amount":"12"}`, nil},
		{"fraction", `{"id":"bad-fraction","account":"a","amount":12.5}`, nil},
		{"exponent", `{"id":"bad-exponent","account":"a","amount":1e3}`, nil},
		{"overflow", `{"id":"bad-overflow","account":"a","amount":9223372036854775808}`, nil},
		{"not an object", `["bad-array"]`, map[string]sqstypes.MessageAttributeValue{"sqsonce-id": str("bad-array")}},
		{"not JSON", `\u0001 not json at all`, map[string]sqstypes.MessageAttributeValue{"sqsonce-id": str("bad-not-json")}},
		{"whitespace body", " ", map[string]sqstypes.MessageAttributeValue{"sqsonce-id": str("bad-whitespace")}},
		{"unicode noise", "{\"id\":\"bad-unicode\",\"account\":\"\u00e9\u6f22\",\"amount\":\"\U0001F600\"}", nil},
	}
	rejected := 0
	for _, m := range corpus {
		if err := l.sendRaw(m.body, m.attrs); err != nil {
			// SQS itself refuses some input (e.g. over 256 KB with the
			// attributes); that is an answer too, and nothing reaches us.
			t.Logf("%s: SQS refused it: %v", m.name, err)
			rejected++
		}
	}
	sent := l.send(size(100, 500), 0.05, 0)
	sent.Malformed = len(corpus) - rejected
	w := l.startWorker("-concurrency", "8")
	l.waitDrained(3 * time.Minute)
	w.kill()
	copies := l.check(sent)
	report(t, "%d corpus messages (%d refused by SQS) + %d credits; 0 faults, 0 crashes; invariants hold: %v; extra DLQ copies: %d",
		len(corpus), rejected, sent.Messages, !t.Failed(), copies)
}

// Scenario 6: credits waiting in the DLQ are redriven by sqs-redrive, which
// is SIGKILLed mid-move and run again; a worker then applies each credit
// exactly once, including those the crash left in both queues and those
// that had already been applied before they were dead-lettered.
func TestRedriveUnderCrash(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	// Some credits are applied normally first...
	first := l.send(size(100, 500), 0, 0)
	w := l.startWorker("-concurrency", "16")
	l.waitDrained(2 * time.Minute)
	w.kill()
	// ...then all of them plus new ones land in the DLQ as if they had
	// failed: the consumer must apply the new ones once and drop the old.
	n := size(300, 2000)
	var fresh sendReport
	fresh.Accounts = map[string]int64{}
	bodies := dlqCredits(t, l, ctx, n, &fresh)
	crashes := 0
	for attempt := 0; ; attempt++ {
		cmd := redriveCmd(l, "move", l.name+"-dlq", "--yes", "--rate", "100", "--visibility-timeout", "3s")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if attempt < 2 {
			time.Sleep(time.Duration(700+rand.IntN(600)) * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			crashes++
			time.Sleep(4 * time.Second) // what the killed run held comes back (its visibility timeout)
			continue
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("final sqs-redrive move: %v\n%s", err, out.String())
		}
		t.Logf("final sqs-redrive move:\n%s", out.String())
		break
	}
	w = l.startWorker("-concurrency", "16")
	l.waitDrained(3 * time.Minute)
	w.kill()
	l.check(first, fresh)
	report(t, "%d credits applied first, %d dead letters (%d already applied) redriven with %d SIGKILLs of sqs-redrive; invariants hold: %v",
		first.Distinct, bodies, first.Distinct, crashes, !t.Failed())
}

func withEnv(env []string, kv ...string) []string {
	out := make([]string, 0, len(env)+len(kv))
	for _, e := range env {
		keep := true
		for _, s := range kv {
			k, _, _ := strings.Cut(s, "=")
			if strings.HasPrefix(e, k+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, e)
		}
	}
	return append(out, kv...)
}
