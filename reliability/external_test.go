package reliability

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Scenario: effects outside the database. Every credit is charged at the
// toy bank (`ledger bank`) before it is applied, as step "charge" of its
// dedupe record (`ledger work -bank URL`). The bank charges again on every
// POST whatever its Idempotency-Key (-idempotent=false) and drops one
// answer in ten after charging (-drop-rate 0.1); three workers are
// SIGKILLed at random, between a charge and its record among other
// moments. With -bank-policy reconcile (the default) every credit must be
// charged exactly once, as the bank's own list (GET /charges) shows, and
// applied exactly once. The same run with -bank-policy rerun is measured,
// not asserted: its double charges are the reason steps exist. Against a
// bank that dedupes by the key (-idempotent=true), rerun is exact too.
// It runs on each store.
func TestExternalEffects(t *testing.T) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			for _, c := range []struct {
				name       string
				policy     string
				idempotent bool
				exact      bool // every credit charged once is asserted
			}{
				{"reconcile", "reconcile", false, true},
				{"rerun-non-idempotent", "rerun", false, false},
				{"rerun-idempotent", "rerun", true, true},
			} {
				t.Run(c.name, func(t *testing.T) {
					testExternalEffects(t, store, c.policy, c.idempotent, c.exact)
				})
			}
		})
	}
}

// bankDropRate is the share of charges the bank applies and then drops
// the answer of.
const bankDropRate = 0.1

// bankDelay is how long the bank takes over each charge.
const bankDelay = 200 * time.Millisecond

func testExternalEffects(t *testing.T, store, policy string, idempotent, exact bool) {
	l := newLedgerStore(t, store)
	l.setMaxReceiveCount(crashMaxReceiveCount)
	sent := l.send(size(300, 2000), 0.10, 0.01)
	// The bank takes 200 ms over each charge, and each credit waits 100 ms
	// after its charge (before its transaction), so that a run lasts
	// several kills and kills land in a charge (its step recorded
	// "started": the attempt that takes the credit over finds its outcome
	// unknown) and between a charge and the credit's commit. The claim's
	// lease is short (5 s), so a killed worker's credits are taken over
	// soon after their visibility (4 s) ends.
	_, bankURL := l.startListening("bank", "-idempotent="+fmt.Sprint(idempotent), "-drop-rate", fmt.Sprint(bankDropRate), "-delay", bankDelay.String())
	args := slices.Concat(killedWorkerArgs, []string{"-concurrency", "8", "-handler-delay", "100ms",
		"-bank", bankURL, "-bank-policy", policy, "-lease", "5s"})
	workers := []*worker{l.startWorker(args...), l.startWorker(args...), l.startWorker(args...)}
	all := append([]*worker(nil), workers...)
	crashes := 0
	deadline := time.Now().Add(10 * time.Minute)
	for !l.status().Drained && time.Now().Before(deadline) {
		// The first kill soon, so that even a short run on a fast machine
		// is killed several times while charges are under way.
		pause := time.Duration(1000+rand.IntN(1000)) * time.Millisecond
		if crashes == 0 {
			pause = time.Duration(300+rand.IntN(500)) * time.Millisecond
		}
		time.Sleep(pause)
		i := rand.IntN(len(workers))
		workers[i].kill()
		crashes++
		workers[i] = l.startWorker(args...)
		all = append(all, workers[i])
	}
	l.waitDrained(2 * time.Minute)
	copies, _ := l.check(sent)

	charges := bankCharges(t, bankURL)
	doubled, extra, missing := 0, 0, 0
	for ref, n := range charges {
		if n > 1 {
			doubled++
			extra += n - 1
		}
		if strings.HasPrefix(ref, "bad-") {
			t.Errorf("malformed credit %s was charged", ref)
		}
	}
	missing = sent.Distinct - len(charges)
	if missing != 0 {
		t.Errorf("%d credits charged at the bank, want %d: %d never charged", len(charges), sent.Distinct, missing)
	}
	if exact && doubled != 0 {
		t.Errorf("%d credits charged more than once (%d extra charges), want none", doubled, extra)
	}
	var stats struct {
		Answers map[string]int `json:"answers"`
	}
	getJSON(t, bankURL+"/stats", &stats)
	ev := stepEvents(t, all...)
	if crashes < 3 || stats.Answers["POST dropped"] == 0 || ev.startedFound == 0 {
		t.Errorf("%d crashes, %d answers dropped by the bank, %d charges found started after a kill; want at least 3 crashes, some dropped answers and some kills mid-charge",
			crashes, stats.Answers["POST dropped"], ev.startedFound)
	}
	report(t, "%d messages (%d distinct credits, %d malformed), bank -idempotent=%v -drop-rate %v -delay %v, -bank-policy %s: %d charge answers dropped, %d SIGKILLs, %d charges found started after a kill, %d outcomes unknown, reconciled %d found / %d not found / %d still unknown, %d rerun; charged at the bank: %d credits, %d charged more than once (%d extra charges); invariants hold: %v; extra DLQ copies: %d",
		sent.Messages, sent.Distinct, sent.Malformed, idempotent, bankDropRate, bankDelay, policy, stats.Answers["POST dropped"], crashes,
		ev.startedFound, ev.unknown, ev.found, ev.notFound, ev.stillUnknown, ev.rerun,
		len(charges), doubled, extra, !t.Failed(), copies)
}

// startListening runs a long-lived ledger subcommand that prints
// "listening on URL" as its first line (bank, serve) and returns its URL.
func (l *ledger) startListening(sub string, args ...string) (*worker, string) {
	l.t.Helper()
	w := l.start(sub, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(w.log)
		if err != nil {
			l.t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			if u, ok := bytes.CutPrefix(line, []byte("listening on ")); ok {
				return w, string(bytes.TrimSpace(u))
			}
		}
	}
	b, _ := os.ReadFile(w.log)
	l.t.Fatalf("%s did not print its address within 30 s:\n%s", sub, b)
	return nil, ""
}

// bankCharges reads the bank's charges (GET /charges, JSON lines) and
// counts them by ref.
func bankCharges(t *testing.T, bankURL string) map[string]int {
	t.Helper()
	resp, err := http.Get(bankURL + "/charges")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var c struct {
			Ref string `json:"ref"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("GET /charges line %q: %v", sc.Text(), err)
		}
		out[c.Ref]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// getJSON decodes the JSON answer of GET url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// stepCounts are the workers' step events, from their logs.
type stepCounts struct {
	unknown, startedFound, found, notFound, stillUnknown, rerun int
}

// stepEvents counts the step events the workers logged (the dedupe
// middleware logs each: "dedupe: step outcome unknown", "dedupe: step
// reconcile_found", ...). A charge found started is an attempt that took
// over a credit whose worker was killed between the charge and its
// record.
func stepEvents(t *testing.T, workers ...*worker) stepCounts {
	t.Helper()
	var c stepCounts
	for _, w := range workers {
		b, err := os.ReadFile(w.log)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			switch {
			case bytes.Contains(line, []byte(`"msg":"dedupe: step outcome unknown"`)):
				c.unknown++
				if bytes.Contains(line, []byte("stopped before recording its outcome")) {
					c.startedFound++
				}
			case bytes.Contains(line, []byte(`"msg":"dedupe: step reconcile_found"`)):
				c.found++
			case bytes.Contains(line, []byte(`"msg":"dedupe: step reconcile_not_found"`)):
				c.notFound++
			case bytes.Contains(line, []byte(`"msg":"dedupe: step outcome reconcile_still_unknown"`)):
				c.stillUnknown++
			case bytes.Contains(line, []byte(`"msg":"dedupe: step rerun"`)):
				c.rerun++
			}
		}
	}
	return c
}
