package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// Scenario 7: the downstream is down. Every credit is charged at the
// ledger's toy bank (`ledger bank`) before its transaction, and the bank
// answers 503 with Retry-After for the first 30 s (10 minutes at full
// size), from when the workers start. Three workers, the queue's
// maxReceiveCount 3; during the outage workers are SIGKILLed and
// restarted, each at most once (twice at short size, three times at full
// size), so that no credit is held by two workers killed in turn (see
// outageMaxReceiveCount).
//
// With back-pressure the workers pause: no receive call while paused but
// one for a probe when a worker holds nothing to probe with, held
// messages kept invisible, not released. The test checks that no credit
// is dead-lettered (only the malformed messages are in the DLQ), that the
// bank charged every credit exactly once and the ledger applied each
// exactly once, and, from each worker's log, that it made at most one
// receive call a pause.
//
// Without back-pressure (-back-pressure=false: a 503 is an ordinary
// transient failure, retried with the consumer's backoff) the same
// scenario is run once, on DynamoDB, and its dead-lettered credits are
// counted: the figure the README quotes. It checks only what must hold
// either way: nothing applied or charged twice, every credit applied or in
// the DLQ.
func TestDownstreamOutage(t *testing.T) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { testDownstreamOutage(t, store, true) })
	}
	t.Run("without back-pressure", func(t *testing.T) { testDownstreamOutage(t, storeDynamoDB, false) })
}

// outageMaxReceiveCount is the outage scenario's maxReceiveCount: a
// credit is received once before the outage is found (the first wave
// fails with the Retry-After; the rest are held), once more when it comes
// back after a kill of the worker that held it, and once after the
// outage, when it is charged. No receive is spent on a pause: that is what
// the scenario measures.
const outageMaxReceiveCount = 3

// outageSize is the scenario's size: the outage, the visibility timeout
// (proportionally short, as a kill's held messages come back after it),
// the kills during the outage, and the credits.
func outageSize() (outage, visibility time.Duration, kills, credits int) {
	if full() {
		return 10 * time.Minute, 60 * time.Second, 3, 3000
	}
	return 30 * time.Second, 4 * time.Second, 2, 300
}

func testDownstreamOutage(t *testing.T, store string, backPressure bool) {
	outage, visibility, kills, n := outageSize()
	l := newLedgerStore(t, store)
	l.setMaxReceiveCount(outageMaxReceiveCount)
	// No duplicate messages: two copies of a credit running at once make
	// the second wait for the first's claim (dedupe's "in progress
	// elsewhere", a receive each recheck), a cost of duplicates that the
	// crash scenarios measure, not of an outage.
	sent := l.send(n, 0, 0.01)

	// The bank is down from its start for outage (the first window of
	// one an hour).
	_, bankURL := l.startListening("bank", "-outage-every", "1h", "-outage-for", outage.String())
	args := []string{"-concurrency", "16", "-visibility", visibility.String(), "-wait", "1s", "-log-level", "debug",
		"-bank", bankURL, "-back-pressure=" + fmt.Sprint(backPressure)}
	start := time.Now()
	end := start.Add(outage)
	workers := []*worker{l.startWorker(args...), l.startWorker(args...), l.startWorker(args...)}
	all := append([]*worker(nil), workers...)
	// Kill each worker at most once, spread over the outage's middle.
	for k := range kills {
		time.Sleep(time.Until(start.Add(outage * time.Duration(k+1) / time.Duration(kills+1))))
		workers[k].kill()
		workers[k] = l.startWorker(args...)
		all = append(all, workers[k])
	}
	l.waitDrained(outage + 10*time.Minute)
	for _, w := range workers {
		w.kill()
	}

	charges := bankChargeList(t, bankURL)
	byRef := map[string]int{}
	perAccount := map[string]int64{}
	for _, c := range charges {
		if byRef[c.Ref]++; byRef[c.Ref] == 1 {
			perAccount[c.Account] += c.Amount
		}
	}
	twice := 0
	for _, k := range byRef {
		if k > 1 {
			twice++
		}
	}
	if twice > 0 {
		t.Errorf("the bank charged %d credits more than once", twice)
	}
	logs := outageLogs(t, all, end)

	if !backPressure {
		// Measured, not a target: how many credits SQS moved to the DLQ.
		dead := deadCredits(t, l)
		var audit struct {
			Credits      int `json:"credits"`
			AppliedTwice int `json:"applied_twice"`
		}
		if err := json.Unmarshal(l.run("audit", "-json"), &audit); err != nil {
			t.Fatal(err)
		}
		if audit.AppliedTwice != 0 || audit.Credits+len(dead) < sent.Distinct {
			t.Errorf("journal: %d credits applied (%d twice), %d distinct credits dead-lettered; want every one of %d applied once or dead-lettered",
				audit.Credits, audit.AppliedTwice, len(dead), sent.Distinct)
		}
		report(t, "%d credits (%d distinct), bank down %s, maxReceiveCount %d, %d SIGKILLs, back-pressure OFF: %d distinct credits dead-lettered (%d messages), %d applied, %d charged, none twice; receive calls during the outage: %d",
			sent.Messages, sent.Distinct, outage, outageMaxReceiveCount, kills, len(dead), sumCounts(dead), audit.Credits, len(byRef), logs.receivesInOutage)
		return
	}

	l.check(sent)
	if len(byRef) != sent.Distinct {
		t.Errorf("the bank charged %d distinct credits, want %d", len(byRef), sent.Distinct)
	}
	for a, v := range sent.Accounts {
		if perAccount[a] != v {
			t.Errorf("account %s: charged %d, want %d", a, perAccount[a], v)
		}
	}
	if logs.pauses == 0 {
		t.Errorf("no worker paused")
	}
	if logs.whilePaused > logs.pauses {
		t.Errorf("%d receive calls while paused, more than one a pause (%d pauses): %v", logs.whilePaused, logs.pauses, logs.perWorker)
	}
	report(t, "%d credits (%d distinct, %d malformed), bank down %s, maxReceiveCount %d, %d SIGKILLs during the outage: 0 credits dead-lettered (invariants hold: %v), %d charged once each; %d pauses, %d receive calls while paused (at most one a pause), %d receive calls during the outage by %d workers",
		sent.Messages, sent.Distinct, sent.Malformed, outage, outageMaxReceiveCount, kills, !t.Failed(), len(byRef), logs.pauses, logs.whilePaused, logs.receivesInOutage, len(all))
}

// bankCharge is one line of the bank's GET /charges.
type bankCharge struct {
	Ref     string `json:"ref"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// bankChargeList reads the bank's charges (GET /charges, JSON lines).
func bankChargeList(t *testing.T, url string) []bankCharge {
	t.Helper()
	resp, err := http.Get(url + "/charges")
	if err != nil {
		t.Fatalf("GET /charges: %v", err)
	}
	defer resp.Body.Close()
	var out []bankCharge
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c bankCharge
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("GET /charges line %q: %v", sc.Text(), err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return out
}

// outageCounts is what the workers' logs say of the outage.
type outageCounts struct {
	pauses, whilePaused, receivesInOutage int
	perWorker                             []string
}

// pauseSlack is how long after a worker's "paused" line a receive it logs
// still counts as begun before the pause: a receiver that passed the gate
// just before the pause logs its call just after. A probe's receive comes
// a pause later (every pause of the scenario is at least a second, the
// bank's shortest Retry-After); a receiver that ignored the pause would
// go on receiving all through it.
const pauseSlack = time.Second

// outageLogs reads each worker's log in order: its pauses ("consumer:
// paused…" lines), its receive calls ("ledger: receive", logged at each
// call's start) while paused, and its receive calls before end.
func outageLogs(t *testing.T, workers []*worker, end time.Time) outageCounts {
	t.Helper()
	var c outageCounts
	for i, w := range workers {
		b, err := os.ReadFile(w.log)
		if err != nil {
			t.Fatal(err)
		}
		paused := false
		var pausedAt time.Time
		pauses, during := 0, 0
		for line := range bytes.Lines(b) {
			var e struct {
				TS  float64 `json:"ts"`
				Msg string  `json:"msg"`
			}
			if json.Unmarshal(line, &e) != nil {
				continue // the bank client's or a cut last line
			}
			at := time.Unix(0, int64(e.TS*1e9))
			switch {
			case strings.HasPrefix(e.Msg, "consumer: paused"):
				paused, pausedAt = true, at
				pauses++
			case strings.HasPrefix(e.Msg, "consumer: resumed"):
				paused = false
			case e.Msg == "ledger: receive":
				if at.Before(end) {
					c.receivesInOutage++
				}
				if paused && at.Sub(pausedAt) > pauseSlack {
					during++
				}
			}
		}
		c.pauses += pauses
		c.whilePaused += during
		c.perWorker = append(c.perWorker, fmt.Sprintf("worker %d: %d pauses, %d receives while paused", i, pauses, during))
	}
	return c
}

// deadCredits counts the DLQ's credits (not malformed messages) by
// sqsonce-id: those SQS moved there by the queue's maxReceiveCount carry no
// failure record, so dlqIDs' checks do not apply.
func deadCredits(t *testing.T, l *ledger) map[string]int {
	t.Helper()
	ctx := context.Background()
	visible, inFlight := testenv.Count(t, l.sqs, l.urls.dlq)
	want := visible + inFlight
	seen := map[string]bool{}
	ids := map[string]int{}
	for deadline := time.Now().Add(time.Minute); len(seen) < want && time.Now().Before(deadline); {
		out, err := l.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(l.urls.dlq), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 3,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			continue
		}
		for _, m := range out.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			id := ""
			if v, ok := m.MessageAttributes[consumer.AttrID]; ok {
				id = aws.ToString(v.StringValue)
			}
			if id == "" {
				id = creditID(aws.ToString(m.Body))
			}
			if !strings.HasPrefix(id, "bad-") {
				ids[id]++
			}
		}
	}
	if len(seen) < want {
		t.Errorf("read %d of the DLQ's %d messages within a minute", len(seen), want)
	}
	return ids
}

// creditID is a credit body's "id" ("" when it has none).
func creditID(body string) string {
	var c struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(body), &c)
	return c.ID
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
