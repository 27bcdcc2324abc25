package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
)

// row is one line of the table: a sqsonce figure next to its limit.
type row struct {
	group string // the chart groups rows by this
	name  string
	value sample // sqsonce
	limit sample // empty when the row has none
	// ratio is value / limit run by run, when the two sides were run
	// interleaved; otherwise the ratio of the medians.
	ratio  sample
	unit   string
	target target
	note   string
}

// ratios returns the row's ratio sample (empty without a limit).
func (r row) ratios() sample {
	if len(r.ratio) > 0 {
		return r.ratio
	}
	if len(r.limit) == 0 || r.limit.med() == 0 {
		return nil
	}
	return one(r.value.med() / r.limit.med())
}

// target is what a row must reach; the zero target is none.
type target struct {
	kind targetKind
	x, y float64
}

type targetKind int

const (
	noTarget targetKind = iota
	ratioMin            // median ratio ≥ x
	ratioMax            // median ratio ≤ x
	valueMax            // median value ≤ x
	ratioIn             // x ≤ median ratio ≤ y
)

func atLeast(x float64) target          { return target{kind: ratioMin, x: x} }
func atMost(x float64) target           { return target{kind: ratioMax, x: x} }
func valueAtMost(x float64) target      { return target{kind: valueMax, x: x} }
func ratioWithin(lo, hi float64) target { return target{kind: ratioIn, x: lo, y: hi} }
func (t target) none() bool             { return t.kind == noTarget }
func (r row) with(t target) row         { r.target = t; return r }

func (t target) String() string {
	switch t.kind {
	case ratioMin:
		return fmt.Sprintf("ratio ≥ %g", t.x)
	case ratioMax:
		return fmt.Sprintf("ratio ≤ %g", t.x)
	case valueMax:
		return fmt.Sprintf("≤ %g", t.x)
	case ratioIn:
		return fmt.Sprintf("%g ≤ ratio ≤ %g", t.x, t.y)
	}
	return ""
}

// at is the target as a value in the row's unit (for the chart), 0 when
// there is none.
func (r row) targetValue() float64 {
	switch r.target.kind {
	case ratioMin, ratioMax, ratioIn:
		return r.target.x * r.limit.med()
	case valueMax:
		return r.target.x
	}
	return 0
}

// verdict is "yes" or "no" for a row with a target, "" otherwise. It
// judges the median: of the run-by-run ratios, or of the value.
func (r row) verdict() string {
	var ok bool
	switch r.target.kind {
	case noTarget:
		return ""
	case ratioMin:
		ok = len(r.ratios()) > 0 && r.ratios().med() >= r.target.x
	case ratioMax:
		ok = len(r.ratios()) > 0 && r.ratios().med() <= r.target.x
	case valueMax:
		ok = len(r.value) > 0 && r.value.med() <= r.target.x
	case ratioIn:
		ok = len(r.ratios()) > 0 && r.ratios().med() >= r.target.x && r.ratios().med() <= r.target.y
	}
	if ok {
		return "yes"
	}
	return "no"
}

type bench struct {
	ctx     context.Context
	client  *sqs.Client
	ddb     *dynamodb.Client
	env     *env
	n       int  // messages per throughput run
	runs    int  // interleaved runs of each side
	quick   bool // shorter timed rows
	pollers int  // the plain loop's best poller count, from a warm-up
	errw    io.Writer
	// skipped says which rows are missing and why (written under the
	// table).
	skipped []string
	// redone counts runs done again after a receive response was lost.
	redone int
	// isolation says where DynamoDB Local ran during the rows that call
	// it (see isolateDynamoDB); empty when no such row ran.
	isolation string
}

// dynamoRows are the row sets that call DynamoDB, which run with DynamoDB
// Local on a CPU of its own when -isolate allows it.
var dynamoRows = map[string]bool{"dedupe": true, "lookahead": true, "idem": true, "outbox": true, "limits": true}

// minRuns is the fewest interleaved runs a published table uses.
const minRuns = 5

// rowSets are the parts of the table, in order, by their -only names.
var rowSets = []string{"noop", "offered", "io", "fifo", "dedupe", "lookahead", "idem", "outbox", "postgres", "telemetry", "limits", "heartbeat", "latency", "memory"}

func runTable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 10000, "messages per throughput run (the no-op rows drain 4n, the memory rows 2n and 20n)")
	runs := fs.Int("runs", minRuns, "interleaved runs of each side of a row that has a limit (fewer than 5 only for a smoke test)")
	quick := fs.Bool("quick", false, "shorten the timed rows (heartbeat, latency, bodies in flight): a smoke test, not figures")
	isolate := fs.Bool("isolate", true, "run the rows that call DynamoDB with the local stack's DynamoDB Local on a CPU of its own (Linux, 2 or more CPUs), as DynamoDB never shares the client's CPU")
	only := fs.String("only", "", "run only these rows, comma-separated: "+strings.Join(rowSets, ","))
	mdPath := fs.String("md", "", "also write the table as Markdown to `FILE` (with the date, Go version, CPUs and command)")
	svgPath := fs.String("svg", "", "also write the table as an SVG bar chart to `FILE`")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE` (go tool pprof -top bench FILE)")
	mutexprofile := fs.String("mutexprofile", "", "write a profile of the time goroutines waited for locks, over the whole run, to `FILE` (go tool pprof -top -focus sqsonce/consumer FILE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 10 || *runs < 1 || fs.NArg() > 0 {
		return errors.New("usage: bench [-n N ≥ 10] [-runs R ≥ 1] [-quick] [-only rows] [-md FILE] [-svg FILE] [-cpuprofile FILE] [-mutexprofile FILE]")
	}
	want := func(name string) bool { return *only == "" || slices.Contains(strings.Split(*only, ","), name) }
	for _, name := range strings.Split(*only, ",") {
		if *only != "" && !slices.Contains(rowSets, name) {
			return fmt.Errorf("-only: unknown row set %q (have %s)", name, strings.Join(rowSets, ","))
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *mutexprofile != "" {
		f, err := os.Create(*mutexprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		runtime.SetMutexProfileFraction(1)
		defer func() {
			if err := pprof.Lookup("mutex").WriteTo(f, 0); err != nil {
				fmt.Fprintf(stderr, "bench: mutex profile: %v\n", err)
			}
		}()
	}
	// Open the output files first, as temporary files beside them: a path
	// that cannot be written fails now, not after the whole run, and a
	// failed run leaves the last table in place.
	var mdFile, svgFile *os.File
	for _, o := range []struct {
		path string
		f    **os.File
	}{{*mdPath, &mdFile}, {*svgPath, &svgFile}} {
		if o.path == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(o.path), 0o755); err != nil {
			return err
		}
		f, err := os.CreateTemp(filepath.Dir(o.path), "."+filepath.Base(o.path)+".*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		*o.f = f
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	// Both clients are guarded against the SDK's request-body race
	// (internal/sdkhttp), as sqsonce's own calls are, so that the plain
	// loops, the limits, measure the loop and not the race. Only against
	// the race (GuardDrain): the plain loops write each request as the
	// SDK does, headers then body, where sqsonce's calls (sdkhttp.Guard,
	// which upgrades this guard) write it in one write.
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, countReceiveRetries)
		o.HTTPClient = sdkhttp.GuardDrain(o.HTTPClient)
	})
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// DynamoDB Local omits the CRC32 header on error responses.
		o.DisableValidateResponseChecksum = os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != ""
		// Room for every call the rows make at once (32 handlers): with
		// the SDK's 10 idle connections per host, each call beyond 10
		// would open a connection and close it after.
		o.HTTPClient = sdkhttp.GuardDrain(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.MaxIdleConnsPerHost = 64 }))
	})
	e, err := newEnv(ctx, client, ddb)
	if err != nil {
		return err
	}
	defer e.cleanup()
	if read, why := newServerCPU(); read != nil {
		serverCPU = read
		defer func() { serverCPU = nil }()
	} else {
		fmt.Fprintf(stderr, "bench: fauxqs's CPU is not measured: %s\n", why)
	}
	b := &bench{ctx: ctx, client: client, ddb: ddb, env: e, n: *n, runs: *runs, quick: *quick, errw: stderr}
	started := time.Now()
	steps := map[string]func() ([]row, error){
		"noop": b.noop, "offered": b.offered, "io": b.ioBound, "fifo": b.fifo, "dedupe": b.dedupeRows, "lookahead": b.lookaheadRows,
		"idem": b.idemRows, "outbox": b.outboxRows, "postgres": b.postgresRows, "telemetry": b.telemetryRows, "limits": b.limitRows,
		"heartbeat": b.heartbeatCost, "latency": b.latency, "memory": b.memory,
	}
	var rows []row
	for _, name := range rowSets {
		if !want(name) {
			continue
		}
		fmt.Fprintf(stderr, "bench: %s rows\n", name)
		more, err := b.rowSet(name, steps[name], *isolate)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rows = append(rows, more...)
	}
	meta := runMeta{
		date:      started.UTC(),
		elapsed:   time.Since(started),
		goVer:     runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		cpus:      runtime.NumCPU(),
		command:   strings.TrimSpace("go run ./bench " + strings.Join(args, " ")),
		runs:      *runs,
		n:         *n,
		skipped:   b.skipped,
		redone:    b.redone,
		isolation: b.isolation,
	}
	writeMarkdownTable(stdout, rows)
	if b.isolation != "" {
		fmt.Fprintf(stdout, "\n%s\n", b.isolation)
	}
	for _, s := range b.skipped {
		fmt.Fprintf(stdout, "\n%s.\n", s)
	}
	if err := finish(mdFile, *mdPath, func(w io.Writer) error { return writeMarkdown(w, meta, rows) }); err != nil {
		return err
	}
	return finish(svgFile, *svgPath, func(w io.Writer) error { return writeSVG(w, meta, rows) })
}

// rowSet runs one set of rows; a set that calls DynamoDB runs with
// DynamoDB Local isolated when isolate is set and the stack allows it, and
// b.isolation says which happened.
func (b *bench) rowSet(name string, step func() ([]row, error), isolate bool) ([]row, error) {
	if !dynamoRows[name] {
		return step()
	}
	why := "-isolate=false"
	if isolate {
		var undo func()
		if undo, why = isolateDynamoDB(); undo != nil {
			defer undo()
			b.isolation = "The rows that call DynamoDB ran with DynamoDB Local on a CPU of its own and the bench and fauxqs on the others, " +
				"as DynamoDB never shares the client's CPU (-isolate=false runs them shared)."
			return step()
		}
	}
	b.isolation = "The rows that call DynamoDB ran with DynamoDB Local sharing the CPUs with the bench and fauxqs (" + why + ")."
	return step()
}

// finish writes f (nil: nothing to write) and renames it to path.
func finish(f *os.File, path string, write func(io.Writer) error) error {
	if f == nil {
		return nil
	}
	if err := write(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}
