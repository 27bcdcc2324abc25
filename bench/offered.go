package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// offeredRate is the offered load of the CPU-at-a-steady-rate rows: well
// under what either side drains on the local stack (15,000–30,000 msgs/s),
// so that both keep up and run for the same time.
const offeredRate = 5000

// offered: the Go CPU per no-op message when both sides keep up with the
// same steady load, sent by a separate process.
//
// Why a second CPU row: when a side drains a full queue, the two emulators
// and the Go process share two cores and every run is CPU-bound; the Go
// process then burns a nearly constant share of a core (scheduler, GC,
// network), whatever its rate, so its CPU per message is mostly the
// inverse of its rate, and the drain row's CPU ratio follows the
// throughput ratio run by run. At a steady offered rate both sides run for
// the same time, and the difference is the work each does per message,
// idle polling included.
func (b *bench) offered() ([]row, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	n := max(b.n, 100)
	plainRun := func(pollers int) (cpu time.Duration, reqs float64, err error) {
		err = b.withProducer(exe, n, "offered-plain", func(ctx context.Context, q string) (err error) {
			counting := newCounting(b.client, n)
			var use used
			_, use, err = plainLoop(ctx, counting, q, n, pollers, false)
			cpu = use.cpu
			reqs = float64(total(counting.snapshot())) / float64(n)
			return err
		})
		return cpu, reqs, err
	}
	// The plain side's warm-up: 1, 4 and 8 pollers all keep up with the
	// offered rate; the measured runs use the one that took the least CPU.
	pollers, least := 1, time.Duration(math.MaxInt64)
	for _, p := range []int{1, 4, 8} {
		c, _, err := plainRun(p)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(b.errw, "bench:   warm-up: plain loop at %d msgs/s, %d pollers: %.1f µs CPU per message\n", offeredRate, p, micros(c))
		if c < least {
			pollers, least = p, c
		}
	}
	var plainCPU, cpu, plainReqs, reqs sample
	err = b.pairs("offered", b.runs, func() error {
		c, r, err := plainRun(pollers)
		plainCPU, plainReqs = append(plainCPU, micros(c)), append(plainReqs, r)
		return err
	}, func(warmup bool) error {
		var res runResult
		err := b.withProducer(exe, n, "offered", func(ctx context.Context, q string) (err error) {
			res, err = runConsumer(ctx, b.client, q, n, runOpts{concurrency: 32})
			return err
		})
		if warmup {
			return err
		}
		cpu, reqs = append(cpu, micros(res.cpu)), append(reqs, float64(total(res.calls))/float64(n))
		return err
	}, true)
	if err != nil {
		return nil, err
	}
	const g = "CPU and requests per message"
	load := fmt.Sprintf("%d msgs/s offered by a separate process (SendMessageBatch of 10), %d messages per run", offeredRate, n)
	return []row{
		row{group: g, name: fmt.Sprintf("Go CPU per message, no-op, at %d msgs/s offered", offeredRate), value: cpu, limit: plainCPU, ratio: ratios(cpu, plainCPU), unit: "µs",
			note: b.interleaved() + "; " + load + fmt.Sprintf("; sqsonce at conc 32 against the plain loop (asking for the same attributes) with the poller count (%d) of 1/4/8 that took the least CPU in a warm-up, each timed from its start to its last delete; "+
				"both keep up, so both run for the same time: the difference is the work per message (idle receives included), which the drain row cannot show on a machine the emulators keep busy", pollers)}.with(atMost(1.1)),
		{group: g, name: fmt.Sprintf("SQS requests per message at %d msgs/s offered", offeredRate), value: reqs, limit: plainReqs, ratio: ratios(reqs, plainReqs), unit: "req/msg",
			note: "the same runs; receives and delete batches; at a steady rate a receive returns with what has arrived, so both make more than 0.2. " +
				"The plain loop receives again only once its delete returned; sqsonce receives again at once (its deletes are batched apart), " +
				"with one call polling while one keeps up: every call waiting at once would split the batches that arrive (on this emulator, which " +
				"answers every waiting poll when a message arrives, as empty receives) and be one more deep stack for the GC to scan"},
	}, nil
}

// withProducer runs run on a fresh empty queue while a separate process
// (this binary's produce command) sends n messages to it at offeredRate,
// and again when a receive response was lost (see clean). A producer that
// fails ends run's context, so run does not wait for messages that will
// never come.
func (b *bench) withProducer(exe string, n int, name string, run func(ctx context.Context, queueURL string) error) error {
	return b.clean(name, func() error {
		q, err := b.env.queue(b.ctx, name, false)
		if err != nil {
			return err
		}
		defer b.env.drop(b.ctx, q)
		ctx, cancel := context.WithCancelCause(b.ctx)
		defer cancel(nil)
		cmd := exec.CommandContext(ctx, exe, "produce", "-queue-url", q, "-n", strconv.Itoa(n), "-rate", strconv.Itoa(offeredRate))
		cmd.Stdout, cmd.Stderr = io.Discard, b.errw
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("producer: %w", err)
		}
		produced := make(chan error, 1)
		go func() {
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("producer: %w", err)
				cancel(err)
			}
			produced <- err
		}()
		runErr := run(ctx, q)
		if runErr != nil {
			cancel(runErr)
		}
		switch perr := <-produced; {
		case perr != nil && errors.Is(context.Cause(ctx), perr):
			return perr // it failed first: run stopped for it
		case runErr != nil:
			return runErr
		default:
			return perr
		}
	})
}

// runProduce sends N messages to a queue at a steady rate, in batches of
// 10 (the bench's offered-load rows run it as a separate process, so its
// CPU is not counted against either side).
func runProduce(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queueURL := fs.String("queue-url", "", "queue to send to (required)")
	n := fs.Int("n", 0, "messages to send (required)")
	rate := fs.Int("rate", 0, "messages per second, at least 100 (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *queueURL == "" || *n <= 0 || *rate < 100 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: bench produce -queue-url URL -n N -rate R (R ≥ 100)")
		return 2
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bench produce:", err)
		return 1
	}
	client := sqs.NewFromConfig(cfg)
	// Every 10 ms, the messages due in it; a tick that falls behind is
	// caught up by the next (the rate holds over the run).
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	for sent := 0; sent < *n; {
		<-t.C
		due := min(int(time.Since(start).Seconds()*float64(*rate)), *n)
		if due <= sent {
			continue
		}
		if err := preloadWith(ctx, client, *queueURL, due-sent, func(int) string { return "{}" }); err != nil {
			fmt.Fprintln(stderr, "bench produce:", err)
			return 1
		}
		sent = due
	}
	return 0
}
