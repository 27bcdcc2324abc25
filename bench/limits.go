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
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
)

// The fleet-limits run: three `ledger work` processes with -rate and
// -account-concurrency, kept in the ledger's DynamoDB table, charging a
// backlog of credits at `ledger bank`, which counts the charges made in
// each second and the most charges of one account at once.
const (
	fleetWorkers = 3
	fleetRate    = 200 // credits a second, the three workers together
	fleetSeconds = 60  // the window measured, after fleetWarmup
	fleetWarmup  = 5 * time.Second
	// fleetAccounts and fleetChargeDelay make the account limit bind now
	// and then: 200 a second over 20 accounts, each charge taking 40 ms
	// at the bank and some ms more on the way, is about half a charge of
	// an account at once on average, with peaks above 2 (without the
	// limit, 8 accounts at this rate reached 6 at once), yet leaves the
	// accounts' slots room for the rate.
	fleetAccounts    = 20
	fleetPerAccount  = 2
	fleetChargeDelay = 40 * time.Millisecond
	// fleetBucket is the ledger's S3 bucket (credits too large for a
	// message; none here), one for every run.
	fleetBucket = "sqsonce-bench-ledger-payloads"
)

// limitRows: the fleet's limits measured at the bank (rate accuracy, the
// busiest second, the most charges of one account at once), and the
// in-process limiter's CPU per message when it does not limit.
func (b *bench) limitRows() ([]row, error) {
	rate, seconds, warmup := fleetRate, fleetSeconds, fleetWarmup
	if b.quick {
		rate, seconds, warmup = 50, 5, time.Second
	}
	f, err := b.fleetLimits(rate, seconds, warmup)
	if err != nil {
		return nil, fmt.Errorf("fleet limits: %w", err)
	}
	const g = "Limits"
	how := fmt.Sprintf("%d `ledger work` processes (concurrency 64 each) with -rate %d -account-concurrency %d, kept in the ledger's DynamoDB table (package limitdynamo), "+
		"on a backlog of credits of %d accounts, each charged at `ledger bank -delay %s`; counted by the bank (GET /stats: per_second, max_concurrent); "+
		"the %d s after a warm-up of %s from the first charge",
		fleetWorkers, rate, fleetPerAccount, fleetAccounts, fleetChargeDelay, seconds, warmup)
	rows := []row{
		row{group: g, name: fmt.Sprintf("fleet rate: %d workers, -rate %d, charges per second", fleetWorkers, rate), value: one(f.achieved), limit: one(float64(rate)),
			ratio: one(f.achieved / float64(rate)), unit: "charges/s",
			note: how + fmt.Sprintf("; value: charges in the window / %d s; limit: the rate; %s; each worker leases the rate's slots in blocks of a tenth of a second's (one conditional write a block)",
				seconds, f.perSecondNote)}.with(ratioWithin(0.95, 1.02)),
		row{group: g, name: fmt.Sprintf("fleet rate: the busiest second, -rate %d", rate), value: one(float64(f.busiest)), limit: one(float64(rate)),
			ratio: one(float64(f.busiest) / float64(rate)), unit: "charges",
			note: "the same run; every whole second from the first charge to the window's end, the warm-up included"}.with(atMost(1.1)),
		row{group: g, name: fmt.Sprintf("fleet per-key limit: most charges of one account at once, -account-concurrency %d", fleetPerAccount), value: one(float64(f.mostAtOnce)),
			limit: one(fleetPerAccount), ratio: one(float64(f.mostAtOnce) / fleetPerAccount), unit: "charges",
			note: fmt.Sprintf("the same run, the whole of it: the bank's max_concurrent_account (POSTs of one account in progress at once); %d credits charged, %d twice", f.charged, f.twice)}.with(atMost(1)),
	}
	cost, err := b.limiterCost()
	if err != nil {
		return nil, fmt.Errorf("limiter cost: %w", err)
	}
	return append(rows, cost...), nil
}

// fleetResult is what the fleet-limits run measured.
type fleetResult struct {
	achieved      float64 // charges a second over the window
	busiest       int     // the most charges in one second
	mostAtOnce    int     // the most charges of one account at once
	charged       int
	twice         int
	perSecondNote string
}

// fleetLimits runs the ledger's fleet at rate for warmup + seconds.
func (b *bench) fleetLimits(rate, seconds int, warmup time.Duration) (fleetResult, error) {
	ctx := b.ctx
	dir, err := os.MkdirTemp("", "sqsonce-bench-ledger-")
	if err != nil {
		return fleetResult{}, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "ledger")
	fmt.Fprintf(b.errw, "bench:   building the ledger\n")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sqsonce/sqsonce/examples/ledger").CombinedOutput(); err != nil {
		return fleetResult{}, fmt.Errorf("go build the ledger: %w\n%s", err, out)
	}
	name := b.env.prefix + "-ledger"
	global := []string{"-queue", name, "-bucket", fleetBucket}
	ledger := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, append(append([]string{}, global...), args...)...)
		cmd.Env = os.Environ()
		return cmd
	}
	// Cleaned up with the run's queues and tables.
	b.env.tables = append(b.env.tables, name+"-dedupe", name+"-accounts", name+"-idempotency", name+"-outbox", name+"-limits")
	if out, err := ledger("setup").CombinedOutput(); err != nil {
		return fleetResult{}, fmt.Errorf("ledger setup: %w\n%s", err, out)
	}
	for _, q := range []string{name, name + "-dlq"} {
		if out, err := b.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)}); err == nil {
			b.env.urls = append(b.env.urls, aws.ToString(out.QueueUrl))
		}
	}

	bank := ledger("bank", "-delay", fleetChargeDelay.String())
	bankURL, stopBank, err := startListening(bank)
	if err != nil {
		return fleetResult{}, fmt.Errorf("ledger bank: %w", err)
	}
	defer stopBank()

	credits := rate * (int(warmup/time.Second) + seconds + 15)
	fmt.Fprintf(b.errw, "bench:   sending %d credits\n", credits)
	if out, err := ledger("send", "-n", fmt.Sprint(credits), "-accounts", fmt.Sprint(fleetAccounts)).CombinedOutput(); err != nil {
		return fleetResult{}, fmt.Errorf("ledger send: %w\n%s", err, out)
	}

	var workers []*exec.Cmd
	defer func() {
		for _, w := range workers {
			stopProcess(w, 30*time.Second)
		}
	}()
	var logs []*strings.Builder
	for range fleetWorkers {
		w := ledger("work", "-concurrency", "64", "-wait", "1s", "-log-level", "warn", "-bank", bankURL,
			"-rate", fmt.Sprint(rate), "-account-concurrency", fmt.Sprint(fleetPerAccount))
		log := &strings.Builder{}
		w.Stderr = &limitedWriter{w: log, left: 64 << 10}
		if err := w.Start(); err != nil {
			return fleetResult{}, fmt.Errorf("ledger work: %w", err)
		}
		workers = append(workers, w)
		logs = append(logs, log)
	}
	fmt.Fprintf(b.errw, "bench:   %d workers at -rate %d for %s + %d s\n", fleetWorkers, rate, warmup, seconds)

	// Until the bank has counted the window's last second.
	w0 := int(warmup / time.Second)
	var st bankStats
	deadline := time.Now().Add(warmup + time.Duration(seconds)*time.Second + 3*time.Minute)
	for {
		if st, err = readBankStats(ctx, bankURL); err != nil {
			return fleetResult{}, err
		}
		first := firstCharge(st.PerSecond)
		if first >= 0 && len(st.PerSecond) > first+w0+seconds+1 {
			break
		}
		if time.Now().After(deadline) {
			return fleetResult{}, fmt.Errorf("the bank counted %d seconds of charges (%d charges) by the deadline; the workers' logs: %s",
				len(st.PerSecond), st.Charges, tail(logs))
		}
		select {
		case <-ctx.Done():
			return fleetResult{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	for _, w := range workers {
		stopProcess(w, 30*time.Second)
	}
	workers = nil
	if st, err = readBankStats(ctx, bankURL); err != nil {
		return fleetResult{}, err
	}

	first := firstCharge(st.PerSecond)
	window := st.PerSecond[first+w0 : first+w0+seconds]
	sum, busiest := 0, 0
	for _, n := range st.PerSecond[first : first+w0+seconds] {
		busiest = max(busiest, n)
	}
	lo, hi := window[0], window[0]
	for _, n := range window {
		sum += n
		lo, hi = min(lo, n), max(hi, n)
	}
	res := fleetResult{
		achieved:      float64(sum) / float64(seconds),
		busiest:       busiest,
		mostAtOnce:    st.MaxConcurrentAccount,
		charged:       st.Refs,
		twice:         st.Duplicates,
		perSecondNote: fmt.Sprintf("seconds of the window from %d to %d charges", lo, hi),
	}
	return res, nil
}

// bankStats is the part of `ledger bank`'s GET /stats the rows read.
type bankStats struct {
	Charges              int   `json:"charges"`
	Refs                 int   `json:"refs"`
	Duplicates           int   `json:"duplicates"`
	PerSecond            []int `json:"per_second"`
	MaxConcurrentAccount int   `json:"max_concurrent_account"`
}

func readBankStats(ctx context.Context, url string) (bankStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/stats", nil)
	if err != nil {
		return bankStats{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return bankStats{}, fmt.Errorf("bank stats: %w", err)
	}
	defer resp.Body.Close()
	var st bankStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return bankStats{}, fmt.Errorf("bank stats: %w", err)
	}
	return st, nil
}

// firstCharge is the first second with a charge, -1 for none.
func firstCharge(perSecond []int) int {
	for i, n := range perSecond {
		if n > 0 {
			return i
		}
	}
	return -1
}

// startListening starts cmd, which prints "listening on URL" as its
// first line, and returns the URL and a function that stops it.
func startListening(cmd *exec.Cmd) (string, func(), error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { stopProcess(cmd, 10*time.Second) }
	line, err := bufio.NewReader(out).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, out) }()
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		stop()
		return "", nil, fmt.Errorf("first line %q (%v), want listening on URL", line, err)
	}
	return url, stop, nil
}

// stopProcess sends cmd's process SIGTERM and waits for it, killing it
// after wait.
func stopProcess(cmd *exec.Cmd, wait time.Duration) {
	if cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
}

// limitedWriter keeps the first left bytes written to it.
type limitedWriter struct {
	w    io.Writer
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.left > 0 {
		n := min(len(p), l.left)
		_, _ = l.w.Write(p[:n])
		l.left -= n
	}
	return len(p), nil
}

func tail(logs []*strings.Builder) string {
	var parts []string
	for i, l := range logs {
		s := l.String()
		if len(s) > 2000 {
			s = s[len(s)-2000:]
		}
		parts = append(parts, fmt.Sprintf("worker %d: %s", i+1, s))
	}
	return strings.Join(parts, "\n")
}

// limiterCost: the no-op consumer with both in-process limits set and
// never reached (a rate of 10⁹ a second, one message of a key at once,
// each message its own key) against the same consumer without them,
// interleaved: what the limiter costs a message when it does not limit.
// Its drains are the no-op rows' (noopDrain × -n messages, drainRounds
// rounds): a drain of -n no-op messages lasts a fifth of a second, over
// which one stall of this shared machine moved a round's ratio by a tenth.
func (b *bench) limiterCost() ([]row, error) {
	n := noopDrain * b.n
	off := runOpts{concurrency: 32, n: n}
	on := runOpts{concurrency: 32, n: n, limits: consumer.Limits{Rate: 1e9,
		KeyLimitFunc: func(m *consumer.Message) (string, int) { return m.ID, 1 }}}
	for _, o := range []runOpts{off, on} {
		if _, err := b.sqsonceOnce("limits-warm", false, 0, o); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	var offCPU, onCPU, offRate, onRate sample
	rounds := drainRounds(b.runs)
	err := b.pairs("limiter cost", rounds, func() error {
		res, err := b.sqsonceOnce("limits-off", false, 0, off)
		offCPU, offRate = append(offCPU, micros(res.cpu)), append(offRate, res.rate)
		return err
	}, func(bool) error {
		res, err := b.sqsonceOnce("limits-on", false, 0, on)
		onCPU, onRate = append(onCPU, micros(res.cpu)), append(onRate, res.rate)
		return err
	}, false)
	if err != nil {
		return nil, err
	}
	return []row{
		row{group: "Limits", name: "Go CPU per message, limits set and not reached vs none", value: onCPU, limit: offCPU, ratio: ratios(onCPU, offCPU), unit: "µs",
			note: fmt.Sprintf("%s of each, %s messages each; no-op handler, standard queue, conc 32; "+
				"on: Limits{Rate: 1e9 (a token bucket never empty), KeyLimitFunc: each message its own key, limit 1 (a slot taken and freed per message, never held)}; "+
				"limit: the same consumer without Limits; throughput on %.0f, off %.0f msgs/s (medians); target: the limiter's work is a few map and bucket updates per message, so ≤ 1.05",
				interleavedRuns(rounds), thousands(int64(n)), onRate.med(), offRate.med())}.with(atMost(1.05)),
	}, nil
}
