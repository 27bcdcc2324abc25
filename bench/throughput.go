package main

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
)

// noopDrain is how many times -n messages each run of the no-op rows
// (standard and FIFO) drains. A drain of -n (10,000) no-op messages lasts
// under half a second, so one pause of the emulator's or of the scheduler
// moved a pair's ratio by a tenth or more: over 4n the pairs of one run
// spread less than half as wide. fauxqs serves a standard queue that deep
// about a fifth slower, to both sides alike.
const noopDrain = 4

// plainOnce drains a fresh queue of n messages with the plain loop
// (again, on a fresh queue, when a receive response was lost: see clean).
func (b *bench) plainOnce(fifo bool, groups, pollers, n int) (rate float64, use used, err error) {
	return b.plainOnceAsking(fifo, groups, pollers, n, false)
}

// plainOnceAsking is plainOnce, asking for no attributes when bare.
func (b *bench) plainOnceAsking(fifo bool, groups, pollers, n int, bare bool) (rate float64, use used, err error) {
	err = b.clean("plain loop", func() error {
		q, err := b.env.queue(b.ctx, "plain", fifo)
		if err != nil {
			return err
		}
		defer b.env.drop(b.ctx, q)
		if err := preload(b.ctx, b.client, q, n, groups, "{}"); err != nil {
			return err
		}
		rate, use, err = plainLoop(b.ctx, b.client, q, n, pollers, bare)
		return err
	})
	return rate, use, err
}

// sqsonceOnce drains a fresh queue of o.n messages (b.n when 0) through
// the consumer (again, on a fresh queue, when a receive response was lost:
// see clean; o.newHandler, when set, makes each try's handler).
func (b *bench) sqsonceOnce(name string, fifo bool, groups int, o runOpts) (res runResult, err error) {
	n := cmpOr(o.n, b.n)
	err = b.clean(name, func() error {
		q, err := b.env.queue(b.ctx, name, fifo)
		if err != nil {
			return err
		}
		defer b.env.drop(b.ctx, q)
		if err := preload(b.ctx, b.client, q, n, groups, "{}"); err != nil {
			return err
		}
		if o.newHandler != nil {
			o.handler = o.newHandler()
		}
		res, err = runConsumer(b.ctx, b.client, q, n, o)
		return err
	})
	return res, err
}

// plainPollers is the plain loop's warm-up: runs of -n messages at 1, 4
// and 8 pollers, discarded but for the poller count that was fastest,
// which the measured runs then use (see fastestPollers).
func (b *bench) plainPollers(fifo bool, groups int) (int, error) {
	return fastestPollers(func(pollers int) (float64, error) {
		rate, _, err := b.plainOnce(fifo, groups, pollers, b.n)
		if err == nil {
			fmt.Fprintf(b.errw, "bench:   warm-up: plain loop, %d pollers: %.0f msgs/s\n", pollers, rate)
		}
		return rate, err
	})
}

// warmupOrder is the plain loop's warm-up: each poller count twice, the
// second pass backwards so that no count always runs first.
var warmupOrder = []int{1, 4, 8, 8, 4, 1}

// fastestPollers runs the poller counts in warmupOrder and returns the
// count of the fastest run, that is, the count whose faster run was the
// fastest. One run of each was not enough on the FIFO 100-group queue: 4
// and 8 pollers drain within about a tenth of each other there, so a
// single pause in one 10,000-message run decided the count (in ten full
// runs it chose 8 eight times and 4 twice).
func fastestPollers(run func(pollers int) (float64, error)) (int, error) {
	best, bestP := 0.0, warmupOrder[0]
	for _, pollers := range warmupOrder {
		rate, err := run(pollers)
		if err != nil {
			return 0, err
		}
		if rate > best {
			best, bestP = rate, pollers
		}
	}
	return bestP, nil
}

// standardPollers is plainPollers for a standard queue, measured once.
func (b *bench) standardPollers() (int, error) {
	if b.pollers == 0 {
		p, err := b.plainPollers(false, 0)
		if err != nil {
			return 0, err
		}
		b.pollers = p
	}
	return b.pollers, nil
}

// pairs is the symmetric comparison: a warm-up of the sqsonce side (the
// plain side's warm-up chose its poller count) when warm is set, then
// rounds rounds (b.runs, or drainRounds(b.runs) for the no-op drains) of
// one plain run and one sqsonce run, the plain one first in every other
// round (inTurn). sq is told whether its run is the warm-up, whose figures
// it discards.
//
// Each side runs under the profiler label side=plain or side=sqsonce (the
// goroutines it starts inherit it), so a -cpuprofile splits the CPU by
// side: go tool pprof -tagfocus side=sqsonce -top bench FILE.
func (b *bench) pairs(label string, rounds int, plain func() error, sq func(warmup bool) error, warm bool) error {
	plain = labelled("plain", plain)
	sqRun := func(warmup bool) error { return labelled("sqsonce", func() error { return sq(warmup) })() }
	if warm {
		if err := sqRun(true); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	for i := range rounds {
		err := inTurn(i, func() error {
			if err := plain(); err != nil {
				return fmt.Errorf("run %d, plain: %w", i+1, err)
			}
			return nil
		}, func() error {
			if err := sqRun(false); err != nil {
				return fmt.Errorf("run %d, sqsonce: %w", i+1, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(b.errw, "bench:   %s: run %d of %d done\n", label, i+1, rounds)
	}
	return nil
}

// drainRounds is the number of rounds of the no-op drain rows (standard
// and FIFO): 2×runs − 1 (at least 1), so 9 by default. A drain of
// 40,000 no-op messages lasts about 1.5 s a side, far shorter than the
// stretches (10–20 s) in which this shared machine runs both processes up
// to twice as slowly: a stretch that starts or ends inside a round reaches
// one side of it and not the other. With 5 rounds two such rounds moved
// the median; with 9 it takes five. A round of these rows costs about
// 5–10 s, the fill included.
func drainRounds(runs int) int { return max(1, 2*runs-1) }

// labelled runs fn under the profiler label side=side.
func labelled(side string, fn func() error) func() error {
	return func() (err error) {
		pprof.Do(context.Background(), pprof.Labels("side", side), func(context.Context) { err = fn() })
		return err
	}
}

// interleaved is the note every row with a limit carries.
func (b *bench) interleaved() string { return interleavedRuns(b.runs) }

// interleavedRuns is interleaved for a row of the given number of rounds.
func interleavedRuns(rounds int) string {
	return fmt.Sprintf("median (min–max) of %d interleaved runs per side after a warm-up", rounds)
}

// noop: the no-op handler at concurrency 32 against the plain loop, with
// the CPU per message and the SQS requests per message of the same runs.
func (b *bench) noop() ([]row, error) {
	pollers, err := b.standardPollers()
	if err != nil {
		return nil, err
	}
	n := noopDrain * b.n
	var plainRate, plainCPU, plainGC, plainSrv, plainSw, bareRate, bareCPU, rate, cpu, gc, srv, sw, reqs sample
	err = b.pairs("no-op", drainRounds(b.runs), func() error {
		r, u, err := b.plainOnce(false, 0, pollers, n)
		plainRate, plainCPU, plainGC = append(plainRate, r), append(plainCPU, micros(u.cpu)), append(plainGC, micros(u.gc))
		plainSrv, plainSw = appendServer(plainSrv, u), appendSwitches(plainSw, u)
		if err != nil {
			return err
		}
		r, u, err = b.plainOnceAsking(false, 0, pollers, n, true)
		bareRate, bareCPU = append(bareRate, r), append(bareCPU, micros(u.cpu))
		return err
	}, func(warmup bool) error {
		res, err := b.sqsonceOnce("noop", false, 0, runOpts{concurrency: 32, n: n})
		if warmup {
			return err
		}
		rate, cpu, gc = append(rate, res.rate), append(cpu, micros(res.cpu)), append(gc, micros(res.gc))
		srv, sw = appendServer(srv, res.used), appendSwitches(sw, res.used)
		reqs = append(reqs, float64(total(res.calls))/float64(n))
		return err
	}, true)
	if err != nil {
		return nil, err
	}
	// Runs too short for the collector to start in the plain loop leave
	// the GC row without a limit: there is no ratio to take.
	gcLimit, gcRatio := plainGC, ratios(gc, plainGC)
	if plainGC.med() == 0 {
		gcLimit, gcRatio = nil, nil
	}
	return []row{
		row{group: "Throughput, SQS", name: "no-op handler, standard queue (conc 32)", value: rate, limit: plainRate, ratio: ratios(rate, plainRate), unit: "msgs/s",
			note: fmt.Sprintf("%s, %s messages each; limit: plain ReceiveMessage(10) + DeleteMessageBatch loop with the poller count (%d) that was fastest of 1/4/8 in the warm-up (the faster of two runs of %s each), asking for the attributes the consumer asks for (All message and system attributes: the receive count, FIFO group and sqsonce-id it needs, the rest for the handler)", interleavedRuns(drainRounds(b.runs)), thousands(int64(n)), pollers, thousands(int64(b.n)))}.with(atLeast(0.9)),
		{group: "Throughput, SQS", name: "no-op handler vs a plain loop asking for no attributes", value: rate, limit: bareRate, ratio: ratios(rate, bareRate), unit: "msgs/s",
			note: "the same runs; limit: the same plain loop asking for no attributes (run after the other plain run of each round); no target: the consumer needs the attributes, and decoding them is SDK work"},
		row{group: "CPU and requests per message", name: "Go CPU per message, no-op (this process)", value: cpu, limit: plainCPU, ratio: ratios(cpu, plainCPU), unit: "µs",
			note: "the no-op row's runs; limit: the plain loop's CPU per message, asking for the same attributes (the SDK's cost is in both)" + serverNote(srv, plainSrv) + switchNote(sw, plainSw)}.with(atMost(1.1)),
		{group: "CPU and requests per message", name: "Go CPU per message, no-op, vs a plain loop asking for no attributes", value: cpu, limit: bareCPU, ratio: ratios(cpu, bareCPU), unit: "µs",
			note: "the same runs; the difference to the row above is the SDK decoding the attributes (seen in a profile: `go run ./bench -only noop -cpuprofile FILE`); no target"},
		{group: "CPU and requests per message", name: gcRow, value: gc, limit: gcLimit, ratio: gcRatio, unit: "µs",
			note: "the no-op row's runs: the part of each side's CPU per message that the runtime counts as GC (" + gcCPU + ": mark work, assists, idle-P marking, pauses × GOMAXPROCS; an estimate from P time, so not a strict part of the OS's figure); limit: the plain loop's; no target: it shows how much of the gap in the row above is the collector's"},
		row{group: "CPU and requests per message", name: "SQS requests per message (no-op runs)", value: reqs, limit: one(0.2), unit: "req/msg",
			note: "limit: one receive + one delete batch per 10 messages"}.with(valueAtMost(0.22)),
	}, nil
}

// gcRow names the row that splits the garbage collector's part out of the
// no-op CPU row.
const gcRow = "of which garbage collection, no-op (the Go runtime's estimate)"

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// appendServer adds a run's server CPU per message (µs) to s, when it
// was read.
func appendServer(s sample, u used) sample {
	if !u.hasServer {
		return s
	}
	return append(s, micros(u.server))
}

// appendSwitches adds a run's voluntary context switches per 100
// messages to s, when the OS counts them.
func appendSwitches(s sample, u used) sample {
	if !u.hasSwitches {
		return s
	}
	return append(s, 100*u.switches)
}

// switchNote is what a row's note says of this process's voluntary
// context switches on each side. Each is a thread that blocked and must
// later be woken; the plain loop's one goroutine per poller blocks only
// on its calls.
func switchNote(sq, plain sample) string {
	return sidesNote("this process's voluntary context switches per 100 messages (median, from getrusage)", "", sq, plain)
}

// serverNote is what a row's note says of fauxqs's CPU per message on
// each side (see serverCPU). The emulator shares the machine's CPUs with
// this process, so a side that costs it more also slows itself.
func serverNote(sq, plain sample) string {
	return sidesNote("fauxqs's CPU per message (median, from the OS in 10 ms ticks)", " µs", sq, plain)
}

// sidesNote is "; what, sqsonce X unit, plain loop Y unit" with each
// side's median: "" unless both sides' runs measured it.
func sidesNote(what, unit string, sq, plain sample) string {
	if len(sq) == 0 || len(plain) == 0 {
		return ""
	}
	return fmt.Sprintf("; %s, sqsonce %.1f%s, plain loop %.1f%s", what, sq.med(), unit, plain.med(), unit)
}

// ioBound: a 20 ms handler and a heavy-tailed one at concurrency 100. The
// limit of each run is min(the plain loop run beside it, the ideal rate):
// b.n messages divided by the time conc workers need for the same handler
// times, taken in the order the handlers start, with no wait between them
// (list scheduling). For a fixed 20 ms that is conc / 20 ms; for
// heavy-tailed times it is lower than conc / mean, because a run of b.n
// messages ends with its longest handlers, whoever receives them.
func (b *bench) ioBound() ([]row, error) {
	const conc = 100
	pollers, err := b.standardPollers()
	if err != nil {
		return nil, err
	}
	fixed := make([]time.Duration, max(b.n, 1))
	for i := range fixed {
		fixed[i] = 20 * time.Millisecond
	}
	// Log-normal handler times: median 5 ms, p99 200 ms (σ = ln 40 / 2.326).
	mixed := heavyTailed(b.n, 5*time.Millisecond, 200*time.Millisecond)
	var rows []row
	for _, c := range []struct {
		name, label string
		times       []time.Duration
		target      float64
	}{
		{"I/O-bound handler (20 ms, conc 100)", "io", fixed, 0.97},
		{"mixed handler times (median 5 ms, p99 200 ms, conc 100)", "mixed", mixed, 0.95},
	} {
		r, err := b.handlerRow(c.name, c.label, 0, conc, pollers, c.times, atLeast(c.target))
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// handlerRow runs the interleaved pairs of an I/O-bound row: sqsonce at
// concurrency conc, its handler sleeping times[i] for the i-th message it
// starts, against min(the plain loop run beside it, with pollers pollers,
// the ideal rate). On a FIFO queue (groups > 0) of len(times) messages the
// ideal is the time the groups need, each running its messages one after
// another with no wait between them, and at most conc at once (list
// scheduling by group, see groupSchedule); on a standard queue the time
// conc workers need (listSchedule).
func (b *bench) handlerRow(name, label string, groups, conc, pollers int, times []time.Duration, t target) (row, error) {
	fifo := groups > 0
	n := len(times)
	mean := meanOf(times)
	makespan := listSchedule(times, conc)
	if fifo {
		makespan = groupSchedule(times, groups, conc)
	}
	ideal := float64(n) / makespan.Seconds()
	var limit, rate, slept sample
	err := b.pairs(label, b.runs, func() error {
		r, _, err := b.plainOnce(fifo, groups, pollers, n)
		limit = append(limit, min(r, ideal))
		return err
	}, func(warmup bool) error {
		var next, over *atomic.Int64 // handlers started; their time beyond what they asked for
		res, err := b.sqsonceOnce(label, fifo, groups, runOpts{concurrency: conc, n: n, newHandler: func() consumer.Handler {
			next, over = new(atomic.Int64), new(atomic.Int64)
			started, overran := next, over
			return consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Message) error {
				d := times[int(started.Add(1)-1)%len(times)]
				start := time.Now()
				err := sleepCtx(ctx, d)
				overran.Add(int64(time.Since(start) - d))
				return err
			})
		}})
		if warmup {
			return err
		}
		rate = append(rate, res.rate)
		slept = append(slept, micros(time.Duration(over.Load()/max(next.Load(), 1))))
		return err
	}, true)
	if err != nil {
		return row{}, err
	}
	who := fmt.Sprintf("the time %d workers need for the same handler times in the order they start, with no wait between them", conc)
	if fifo {
		who = fmt.Sprintf("the time %d groups need, each running its messages one after another with no wait between them (at most %d at once)", groups, conc)
	}
	note := fmt.Sprintf("%s; limit: min(plain loop, %d messages / %s, %s = %.0f msgs/s)",
		b.interleaved(), n, makespan.Round(time.Millisecond), who, ideal)
	overran := time.Duration(slept.med() * 1000)
	note += fmt.Sprintf("; a handler's sleep overran its time by %s on median (timer and scheduler, counted against sqsonce)", overran.Round(time.Microsecond))
	if overran > 0 {
		// What the limit would be for the handlers as they slept: the
		// overrun is mostly the Go runtime's (its timers wake from a
		// millisecond-resolution poll when the thread is idle) and the
		// machine's, which any Go consumer pays. Not the limit: shown so
		// that the consumer's own share of a gap can be told apart.
		asSlept := make([]time.Duration, n)
		for i, d := range times {
			asSlept[i] = d + overran
		}
		span := listSchedule(asSlept, conc)
		if fifo {
			span = groupSchedule(asSlept, groups, conc)
		}
		note += fmt.Sprintf("; for the handlers as they slept (each time plus that overrun) the ideal is %.0f msgs/s, %.2f of it reached", float64(n)/span.Seconds(), rate.med()/(float64(n)/span.Seconds()))
	}
	if fifo {
		note += "; fauxqs hands out one message per group per receive, so each message of a group waits for the delete of the one before and a receive: round trips the ideal leaves out"
	} else if steady := float64(conc) / mean.Seconds(); steady > ideal*1.01 {
		note += fmt.Sprintf("; the steady rate %d / mean handler time %s = %.0f msgs/s is out of reach in a run of %d messages: its longest handler takes %s",
			conc, mean.Round(10*time.Microsecond), steady, n, slices.Max(times).Round(time.Millisecond))
	}
	return row{group: "Throughput, SQS", name: name, value: rate, limit: limit, ratio: ratios(rate, limit), unit: "msgs/s", note: note}.with(t), nil
}

// groupSchedule is how long the messages of a FIFO queue take, message i
// of group i%groups (as preload sends them) and each group's run in order,
// one at a time: the handlers start, in order, as soon as their group's
// previous message is done and one of workers is free.
func groupSchedule(times []time.Duration, groups, workers int) time.Duration {
	groupFree := make([]time.Duration, groups) // when each group's previous message is done
	free := make(freeAt, workers)
	var end time.Duration
	for i, d := range times {
		g := i % groups
		start := max(free[0], groupFree[g])
		groupFree[g] = start + d
		free[0] = start + d
		end = max(end, start+d)
		heap.Fix(&free, 0)
	}
	return end
}

// listSchedule is how long workers take to run handlers of the given
// times, each started, in order, on the first worker free, with no wait
// between them.
func listSchedule(times []time.Duration, workers int) time.Duration {
	free := make(freeAt, workers) // when each worker is free: all at 0
	var end time.Duration
	for _, d := range times {
		free[0] += d // the first worker free runs the next handler
		end = max(end, free[0])
		heap.Fix(&free, 0)
	}
	return end
}

// freeAt is a min-heap of the times workers are free.
type freeAt []time.Duration

func (f freeAt) Len() int           { return len(f) }
func (f freeAt) Less(i, j int) bool { return f[i] < f[j] }
func (f freeAt) Swap(i, j int)      { f[i], f[j] = f[j], f[i] }
func (f *freeAt) Push(x any)        { *f = append(*f, x.(time.Duration)) }
func (f *freeAt) Pop() any {
	old := *f
	x := old[len(old)-1]
	*f = old[:len(old)-1]
	return x
}

// heavyTailed returns n handler times drawn from a log-normal distribution
// with the given median and 99th percentile, from a fixed seed so every
// run sleeps the same times.
func heavyTailed(n int, median, p99 time.Duration) []time.Duration {
	mu := math.Log(float64(median))
	sigma := math.Log(float64(p99)/float64(median)) / 2.326
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]time.Duration, max(n, 1))
	for i := range out {
		out[i] = time.Duration(math.Exp(mu + sigma*rng.NormFloat64()))
	}
	return out
}

func meanOf(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// percentile of ds (sorted in place), 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[int(q*float64(len(ds)-1))]
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// fifo: 100 groups and 10 groups, sqsonce against the plain loop on a
// FIFO queue. With 10 groups SQS's group locking sets the limit: a group's
// next messages wait until its received ones are deleted.
func (b *bench) fifo() ([]row, error) {
	n := noopDrain * b.n
	var rows []row
	for _, c := range []struct {
		groups int
		target target
	}{{100, atLeast(0.9)}, {10, atLeast(0.95)}} {
		pollers, err := b.plainPollers(true, c.groups)
		if err != nil {
			return nil, err
		}
		var limit, rate, receives, deletes, plainReceives, plainDeletes, plainCPU, cpu, plainSrv, srv, plainSw, sw sample
		label := fmt.Sprintf("fifo-%d", c.groups)
		// Calls per 10 messages: one receive and one delete per 10 when
		// every receive comes back full. On a FIFO queue not all do, on
		// either side (groups are locked by the messages in flight, and
		// fauxqs returns empty receives mid-drain), so the note gives
		// both sides' counts.
		perTen := func(calls int64) float64 { return 10 * float64(calls) / float64(n) }
		err = b.pairs(label, drainRounds(b.runs), func() error {
			r, u, err := b.plainOnce(true, c.groups, pollers, n)
			limit, plainCPU = append(limit, r), append(plainCPU, micros(u.cpu))
			plainSrv, plainSw = appendServer(plainSrv, u), appendSwitches(plainSw, u)
			plainReceives, plainDeletes = append(plainReceives, perTen(u.receives)), append(plainDeletes, perTen(u.deletes))
			return err
		}, func(warmup bool) error {
			res, err := b.sqsonceOnce(label, true, c.groups, runOpts{concurrency: 32, n: n})
			if warmup {
				return err
			}
			rate, cpu = append(rate, res.rate), append(cpu, micros(res.cpu))
			srv, sw = appendServer(srv, res.used), appendSwitches(sw, res.used)
			receives = append(receives, perTen(res.calls["ReceiveMessage"]))
			deletes = append(deletes, perTen(res.calls["DeleteMessageBatch"]))
			return err
		}, true)
		if err != nil {
			return nil, err
		}
		// This process and fauxqs share the machine's CPUs, so each side's
		// CPU per message also slows the server it waits for.
		note := fmt.Sprintf("%s, %s messages each; limit: plain loop on the same FIFO queue shape, with the poller count (%d) that was fastest of 1/4/8 in the warm-up (the faster of two runs of %s each); calls per 10 messages (median; failed and empty ones included), sqsonce %.2f receives and %.2f delete batches, plain loop %.2f and %.2f; Go CPU per message (median), sqsonce %.1f µs, plain loop %.1f µs",
			interleavedRuns(drainRounds(b.runs)), thousands(int64(n)), pollers, thousands(int64(b.n)), receives.med(), deletes.med(), plainReceives.med(), plainDeletes.med(), cpu.med(), plainCPU.med())
		note += serverNote(srv, plainSrv) + switchNote(sw, plainSw)
		if c.groups == 10 {
			note += "; few groups: SQS hands out a group's next messages only once its received ones are deleted; target: the same receives and delete batches as the plain loop, so ≥ 0.95"
		}
		rows = append(rows, row{group: "Throughput, SQS", name: fmt.Sprintf("FIFO, %d groups, no-op (conc 32)", c.groups), value: rate, limit: limit, ratio: ratios(rate, limit), unit: "msgs/s", note: note}.with(c.target))
		if c.groups == 10 {
			// Few groups and I/O-bound handlers: each group's messages run
			// one after another, so every wait between a handler's end and
			// its group's next start (the delete, the receive, the
			// handoffs) is lost outright. A tenth of -n messages (20 ms
			// each, 10 at once: 2 s a run at -n 10,000).
			times := make([]time.Duration, max(b.n/10, c.groups))
			for i := range times {
				times[i] = 20 * time.Millisecond
			}
			r, err := b.handlerRow(fifoIORow, "fifo-10-io", c.groups, 32, pollers, times, target{})
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// fifoIORow names the row of I/O-bound handlers on a FIFO queue of few
// groups.
const fifoIORow = "FIFO, 10 groups, I/O-bound handler (20 ms, conc 32)"
