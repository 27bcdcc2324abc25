package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// row is one line of the table: a sqsonce figure next to its limit.
type row struct {
	name   string
	value  float64
	limit  float64
	unit   string
	target string // e.g. "≥ 0.9"
	note   string
}

func (r row) print(w io.Writer) {
	ratio := "-"
	if r.limit > 0 {
		ratio = fmt.Sprintf("%.2f", r.value/r.limit)
	}
	fmt.Fprintf(w, "| %-44s | %12.1f | %12.1f | %-10s | %6s | %-7s | %s\n", r.name, r.value, r.limit, r.unit, ratio, r.target, r.note)
}

type bench struct {
	ctx    context.Context
	client *sqs.Client
	env    *env
	n      int
	out    io.Writer
	errw   io.Writer
}

func runTable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 10000, "messages per throughput run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	client := sqs.NewFromConfig(cfg)
	e, err := newEnv(ctx, client)
	if err != nil {
		return err
	}
	defer e.cleanup()
	b := &bench{ctx: ctx, client: client, env: e, n: *n, out: stdout, errw: stderr}
	fmt.Fprintf(stdout, "| %-44s | %12s | %12s | %-10s | %6s | %-7s | %s\n", "measure", "sqsonce", "limit", "unit", "ratio", "target", "note")
	fmt.Fprintf(stdout, "|%s|\n", "-----------------------------------------------------------------------------------------------------------------")
	rows, err := b.noop()
	if err != nil {
		return err
	}
	plain := rows[0].limit
	for _, step := range []func() ([]row, error){
		func() ([]row, error) { return b.ioBound(plain) },
		b.fifo,
		b.heartbeatCost,
		b.latency,
		b.memory,
	} {
		more, err := step()
		if err != nil {
			return err
		}
		rows = append(rows, more...)
	}
	for _, r := range rows {
		r.print(stdout)
	}
	return nil
}

// plainBest runs the plain loop at 1, 4 and 8 pollers and returns the best.
func (b *bench) plainBest(fifo bool, groups int) (float64, int, error) {
	best, bestP := 0.0, 0
	for _, pollers := range []int{1, 4, 8} {
		q, err := b.env.queue(b.ctx, "plain", fifo)
		if err != nil {
			return 0, 0, err
		}
		if err := preload(b.ctx, b.client, q, b.n, groups, "{}"); err != nil {
			return 0, 0, err
		}
		rate, err := plainLoop(b.ctx, b.client, q, b.n, pollers)
		if err != nil {
			return 0, 0, err
		}
		fmt.Fprintf(b.errw, "bench: plain loop, %d pollers: %.0f msgs/s\n", pollers, rate)
		if rate > best {
			best, bestP = rate, pollers
		}
	}
	return best, bestP, nil
}

func (b *bench) noop() ([]row, error) {
	limit, pollers, err := b.plainBest(false, 0)
	if err != nil {
		return nil, err
	}
	q, err := b.env.queue(b.ctx, "noop", false)
	if err != nil {
		return nil, err
	}
	if err := preload(b.ctx, b.client, q, b.n, 0, "{}"); err != nil {
		return nil, err
	}
	res, err := runConsumer(b.ctx, b.client, q, b.n, runOpts{concurrency: 32})
	if err != nil {
		return nil, err
	}
	perMsg := float64(total(res.calls)) / float64(b.n)
	return []row{
		{name: "no-op handler, standard queue (conc 32)", value: res.rate, limit: limit, unit: "msgs/s", target: "≥ 0.9", note: fmt.Sprintf("limit: plain loop, %d pollers", pollers)},
		{name: "SQS requests per message (no-op run)", value: perMsg, limit: 0.2, unit: "req/msg", target: "≤ 0.22", note: fmt.Sprintf("%v", res.calls)},
	}, nil
}

// ioBound: a 20 ms handler at concurrency 100; the ideal is
// min(plain loop, concurrency / handler time).
func (b *bench) ioBound(plain float64) ([]row, error) {
	const conc, delay = 100, 20 * time.Millisecond
	q, err := b.env.queue(b.ctx, "io", false)
	if err != nil {
		return nil, err
	}
	if err := preload(b.ctx, b.client, q, b.n, 0, "{}"); err != nil {
		return nil, err
	}
	res, err := runConsumer(b.ctx, b.client, q, b.n, runOpts{concurrency: conc, handlerDelay: delay})
	if err != nil {
		return nil, err
	}
	ideal := min(plain, float64(conc)/delay.Seconds())
	return []row{{name: "I/O-bound handler (20 ms, conc 100)", value: res.rate, limit: ideal, unit: "msgs/s", target: "≥ 0.85", note: "limit: min(plain loop, 100 / 20 ms)"}}, nil
}

// fifo: 100 groups, sqsonce against the plain loop on a FIFO queue.
func (b *bench) fifo() ([]row, error) {
	const groups = 100
	limit, pollers, err := b.plainBest(true, groups)
	if err != nil {
		return nil, err
	}
	q, err := b.env.queue(b.ctx, "fifo", true)
	if err != nil {
		return nil, err
	}
	if err := preload(b.ctx, b.client, q, b.n, groups, "{}"); err != nil {
		return nil, err
	}
	res, err := runConsumer(b.ctx, b.client, q, b.n, runOpts{concurrency: 32})
	if err != nil {
		return nil, err
	}
	return []row{{name: "FIFO, 100 groups, no-op (conc 32)", value: res.rate, limit: limit, unit: "msgs/s", target: "", note: fmt.Sprintf("limit: plain loop on FIFO, %d pollers", pollers)}}, nil
}
