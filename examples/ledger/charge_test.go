package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/step"
)

// dropFirst returns a RandFunc for a bank with DropRate 0.5 that drops
// the first n answers and no other.
func dropFirst(n int) func() float64 {
	var calls atomic.Int64
	return func() float64 {
		if int(calls.Add(1)) <= n {
			return 0 // < DropRate: dropped
		}
		return 0.99
	}
}

// net/http sends a request with an Idempotency-Key again by itself when a
// kept-alive connection closes unanswered and it can rewind the body:
// against a bank that charges on every POST that is a second charge no
// step records. The bank client's charge is never sent twice; a plain
// request, for contrast, is.
func TestBankClientNeverResendsACharge(t *testing.T) {
	t.Parallel()
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "bank client", true: "plain request"}[plain], func(t *testing.T) {
			t.Parallel()
			b, srv := startTestBank(t, bankConfig{NonIdempotent: true, DropRate: 0.5, RandFunc: dropFirst(1)})
			client, err := newBankClient(srv.URL, 1)
			if err != nil {
				t.Fatal(err)
			}
			// A first call opens the connection that the charge then reuses.
			if r, err := client.find(context.Background(), "warm-up"); err != nil || fmt.Sprint(r) != fmt.Sprint(step.NotDone()) {
				t.Fatalf("find: %v %v", r, err)
			}
			cr := credit{ID: "c-1", Account: "a", Amount: 5}
			if plain {
				body := chargeBody(cr.ID, cr.Account, cr.Amount)
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(body))
				req.Header.Set("Idempotency-Key", cr.ID)
				resp, err := client.http.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				if n := len(b.charges()); n != 2 {
					t.Fatalf("a plain request was charged %d times; want 2 (net/http's own resend): the contrast no longer holds", n)
				}
				return
			}
			_, err = client.charge(context.Background(), cr)
			if err == nil || !step.IsUnknown(err) {
				t.Fatalf("charge with a dropped answer: %v; want an error of unknown outcome", err)
			}
			if n := len(b.charges()); n != 1 {
				t.Fatalf("charged %d times, want 1: the client sent the charge again", n)
			}
		})
	}
}

// The bank's answers, as the charge step reads them: 429 and 503 are
// consumer.Unavailable with the Retry-After (the worker pauses), or with
// back-pressure off ordinary transient failures; another 4xx is
// permanent, the bank's answer quoted and cut in the reason.
func TestBankClientAnswers(t *testing.T) {
	t.Parallel()
	answers := map[string]func(http.ResponseWriter){
		"201": func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated); fmt.Fprint(w, `{"id":"ch_1"}`) },
		"200": func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK); fmt.Fprint(w, `{"id":"ch_1","charges":1}`) },
		"503": func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
		},
		"429": func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		},
		"422": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"error":"bad"}`)
		},
		"500": func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) },
		"404 hostile": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "\x1b]0;owned\x07\x1b[31mno such account\r\n"+strings.Repeat("x", 400))
		},
		"404": func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) },
	}
	var next atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answers[next.Load().(string)](w)
	}))
	t.Cleanup(srv.Close)
	client, err := newBankClient(srv.URL, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cr := credit{ID: "c-1", Account: "a", Amount: 5}
	for _, c := range []struct {
		status    string
		unknown   bool
		permanent bool
		retry     time.Duration // the Unavailable's Retry-After, at least
		noBP      bool          // back-pressure off
		slowDown  bool          // RateLimited: an adaptive rate slows down
	}{
		{status: "201"},
		{status: "503", retry: 7 * time.Second},
		{status: "429", retry: time.Second, slowDown: true},
		{status: "503", noBP: true},
		{status: "422", permanent: true},
		{status: "404 hostile", permanent: true},
		{status: "500", unknown: true},
	} {
		next.Store(c.status)
		client.backPressure = !c.noBP
		res, err := client.charge(ctx, cr)
		if c.status == "201" {
			if err != nil || string(res) != `{"id":"ch_1"}` {
				t.Errorf("201: %q %v", res, err)
			}
			continue
		}
		if step.IsUnknown(err) != c.unknown {
			t.Errorf("%s: unknown = %v, want %v (%v)", c.status, step.IsUnknown(err), c.unknown, err)
		}
		if _, ok := errors.AsType[*consumer.PermanentError](err); ok != c.permanent {
			t.Errorf("%s: permanent = %v, want %v (%v)", c.status, ok, c.permanent, err)
		}
		ue, ok := errors.AsType[*consumer.UnavailableError](err)
		if (c.retry > 0) != ok || (ok && ue.RetryAfter < c.retry) {
			t.Errorf("%s: unavailable %v (%v), want one with a Retry-After of at least %v", c.status, ok, err, c.retry)
		}
		if ok && ue.RateLimited != c.slowDown {
			t.Errorf("%s: rate limited %v, want %v (%v)", c.status, ue.RateLimited, c.slowDown, err)
		}
		if _, ok := errors.AsType[*consumer.RetryError](err); ok {
			t.Errorf("%s: a RetryAfter (%v): the bank's 429/503 is Unavailable, or a plain failure", c.status, err)
		}
		if c.noBP && (err == nil || c.unknown || step.IsUnknown(err)) {
			t.Errorf("%s without back-pressure: %v; want a plain transient failure of known outcome", c.status, err)
		}
		if c.status == "404 hostile" {
			if s := err.Error(); strings.ContainsAny(s, "\x1b\x07\r") || strings.Contains(s, strings.Repeat("x", 300)) || !strings.Contains(s, `\x1b[31mno such account\r\n`) {
				t.Errorf("404: the bank's answer in the reason: %q; want it quoted, escaped and cut", s)
			}
		}
	}
	client.backPressure = true
	for status, want := range map[string]step.Reconciliation{"200": step.Done([]byte(`{"id":"ch_1","charges":1}`)), "404": step.NotDone()} {
		next.Store(status)
		got, err := client.find(ctx, "c-1")
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("find on %s: %v %v, want %v", status, got, err, want)
		}
	}
	next.Store("503")
	if got, err := client.find(ctx, "c-1"); err != nil || fmt.Sprint(got) != fmt.Sprint(step.StillUnknown("bank: find c-1: 503 Service Unavailable")) {
		t.Errorf("find on 503: %v %v, want still unknown", got, err)
	}
}

// workBank runs a worker with -bank and extra flags until the queue is
// drained, then stops it as SIGTERM would.
func (l *ledgerCLI) workBank(bankURL string, extra ...string) {
	l.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan string, 1)
	go func() {
		args := append([]string{"work", "-concurrency", "8", "-visibility", "3s", "-wait", "1s", "-lease", "3s", "-bank", bankURL}, extra...)
		code, _, stderr := l.run(ctx, args...)
		if code != 0 {
			stderr = fmt.Sprintf("exit %d: %s", code, lastLines(stderr, 20))
		} else {
			stderr = ""
		}
		done <- stderr
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for empty := 0; empty < 2; time.Sleep(time.Second) {
		var st queueStatus
		if err := json.Unmarshal([]byte(l.ok("status", "-json")), &st); err != nil {
			l.t.Fatal(err)
		}
		if st.QueueDrained {
			empty++
		} else {
			empty = 0
		}
		if time.Now().After(deadline) {
			cancel()
			l.t.Fatalf("queue not drained: %+v\n%s", st, <-done)
		}
	}
	cancel()
	if e := <-done; e != "" {
		l.t.Fatalf("work: %s", e)
	}
}

// chargesByRef counts the bank's charges of each ref.
func chargesByRef(b *bank) map[string]int {
	out := map[string]int{}
	for _, c := range b.charges() {
		out[c.Ref]++
	}
	return out
}

// A worker with -bank charges every credit exactly once at a bank that
// charges again on every POST and drops a third of its answers after
// charging: each lost answer is reconciled, never charged again, and
// every credit is applied once.
func TestWorkBankReconciles(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			l := newLedgerCLIStore(t, false, store)
			var sent sendReport
			if err := json.Unmarshal([]byte(l.ok("send", "-n", "40", "-accounts", "4", "-dup-rate", "0.2", "-json")), &sent); err != nil {
				t.Fatal(err)
			}
			b, srv := startTestBank(t, bankConfig{NonIdempotent: true, DropRate: 0.3})
			l.workBank(srv.URL)
			charges := chargesByRef(b)
			if len(charges) != sent.Distinct {
				t.Errorf("%d credits charged, want %d", len(charges), sent.Distinct)
			}
			for ref, n := range charges {
				if n != 1 {
					t.Errorf("credit %s charged %d times", ref, n)
				}
			}
			if dropped := b.stats().Answers["POST dropped"]; dropped == 0 {
				t.Errorf("the bank dropped no answer: the test did not reconcile anything")
			}
			var audit auditReport
			if err := json.Unmarshal([]byte(l.ok("audit", "-json")), &audit); err != nil {
				t.Fatal(err)
			}
			if audit.Credits != sent.Distinct || audit.Total != sent.Total || audit.AppliedTwice != 0 {
				t.Errorf("audit %+v, want %d credits totalling %d, none twice", audit, sent.Distinct, sent.Total)
			}
		})
	}
}

// With -bank-policy park a charge whose answer was lost is dead-lettered
// (class outcome_unknown, step charge); `ledger unknown` lists it; a
// person's decision and a redrive complete it: applied → not charged
// again, not applied → charged.
func TestWorkBankParkResolveRedrive(t *testing.T) {
	t.Parallel()
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l := newLedgerCLIStore(t, false, store)
			var sent sendReport
			if err := json.Unmarshal([]byte(l.ok("send", "-n", "4", "-accounts", "2", "-json")), &sent); err != nil {
				t.Fatal(err)
			}
			b, srv := startTestBank(t, bankConfig{NonIdempotent: true, DropRate: 1})
			l.workBank(srv.URL, "-bank-policy", "park")

			var parked []unknownLine
			for line := range strings.Lines(l.ok("unknown", "-json")) {
				var u unknownLine
				if err := json.Unmarshal([]byte(line), &u); err != nil {
					t.Fatal(err)
				}
				parked = append(parked, u)
			}
			if len(parked) != sent.Distinct {
				t.Fatalf("ledger unknown lists %d credits, want %d: %+v", len(parked), sent.Distinct, parked)
			}
			for _, u := range parked {
				if u.Step != stepCharge || u.Status != string(step.StatusUnknown) || u.Held || u.Reason == "" {
					t.Fatalf("listed %+v, want step charge, unknown, not held, with a reason", u)
				}
			}
			// The bank charged every one (it drops answers after charging);
			// the person says so for all but one, which is charged again.
			notApplied := parked[0].Credit
			args := []string{"unknown", "-resolve", notApplied + "=not-applied"}
			for _, u := range parked[1:] {
				args = append(args, "-resolve", u.Credit+"=applied")
			}
			l.ok(args...)
			if out := l.ok("unknown"); !strings.Contains(out, "no step of unknown outcome") {
				t.Fatalf("after the decisions: %s", out)
			}
			if code, out, _ := l.run(ctx, "unknown", "-resolve", notApplied+"=applied"); code != 1 || !strings.Contains(out, "no charge of unknown outcome") {
				t.Fatalf("resolving twice: exit %d %s", code, out)
			}

			n := l.names()
			sq := testenv.SQS(t)
			dlq, src := queueURL(t, sq, n.DLQ), queueURL(t, sq, n.Queue)
			moved := 0
			for moved < sent.Distinct {
				out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(dlq), MaxNumberOfMessages: 10,
					WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
				if err != nil {
					t.Fatal(err)
				}
				if len(out.Messages) == 0 {
					t.Fatalf("the DLQ held %d messages, want %d", moved, sent.Distinct)
				}
				for _, m := range out.Messages {
					f, ok := deadletter.ParseFailure(m.MessageAttributes)
					if !ok || f.Class != consumer.ClassOutcomeUnknown || f.Step != stepCharge {
						t.Fatalf("dead letter %s: failure %+v, want class outcome_unknown, step charge", aws.ToString(m.MessageId), f)
					}
					attrs := map[string]sqstypes.MessageAttributeValue{}
					for k, v := range m.MessageAttributes {
						if k != deadletter.AttrFailure {
							attrs[k] = sqstypes.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue}
						}
					}
					if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: m.Body, MessageAttributes: attrs}); err != nil {
						t.Fatal(err)
					}
					if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Fatal(err)
					}
					moved++
				}
			}
			b.mu.Lock()
			b.cfg.DropRate = 0
			b.mu.Unlock()
			l.workBank(srv.URL, "-bank-policy", "park")

			charges := chargesByRef(b)
			for _, u := range parked {
				want := 1
				if u.Credit == notApplied {
					want = 2 // the person said "not applied": charged again
				}
				if charges[u.Credit] != want {
					t.Errorf("credit %s charged %d times, want %d", u.Credit, charges[u.Credit], want)
				}
			}
			var audit auditReport
			if err := json.Unmarshal([]byte(l.ok("audit", "-json")), &audit); err != nil {
				t.Fatal(err)
			}
			if audit.Credits != sent.Distinct || audit.AppliedTwice != 0 {
				t.Errorf("audit %+v, want %d credits, none twice", audit, sent.Distinct)
			}
		})
	}
}

// queueURL is the URL of the queue name.
func queueURL(t *testing.T, sq *sqs.Client, name string) string {
	t.Helper()
	out, err := sq.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// -bank-policy and -lease need -bank; a bad policy or URL is a usage
// error, reported before any configuration problem.
func TestWorkBankUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"work", "-bank-policy", "park"},
		{"work", "-lease", "5s"},
		{"work", "-bank", "http://127.0.0.1:1", "-bank-policy", "retry"},
		{"work", "-bank", "http://127.0.0.1:1", "-lease", "-1s"},
		{"unknown", "-resolve", "c-1=maybe"},
		{"unknown", "-resolve", "c-1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("ledger %s: exit %d, want 2 (usage)\n%s", strings.Join(args, " "), code, stderr.String())
		}
	}
}
