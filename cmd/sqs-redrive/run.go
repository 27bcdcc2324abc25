package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"

	"github.com/sqsonce/sqsonce/awsconfig/s3client"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/printable"
	"github.com/sqsonce/sqsonce/redrive"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

const usage = `sqs-redrive: look at and safely move the messages of SQS dead-letter queues.

usage: sqs-redrive COMMAND [arguments] [flags]

commands:
  list                          every DLQ: source queues, approximate count, oldest message age
  peek DLQ [-n N] [--body]      show messages with their failure and how many times they were
                                redriven; they are visible again at once. A body stored in S3
                                shows as s3://bucket/key and its size; --body reads it from S3
  move DLQ [--to QUEUE]         send messages back (default: the source queue each came from, if SQS
                                moved it (DeadLetterQueueSourceArn) or a consumer signed its failure
                                record, else the DLQ's single source queue; anything else is refused);
                                --signing-key-env NAME (the variable holding the consumers'
                                DeadLetterSigningKey), --dry-run, --max N, --rate N, --yes
  export DLQ FILE [--delete]    write messages as JSON lines ("-" for stdout); --delete removes
                                from the DLQ only what was written and synced
  import FILE QUEUE             send the messages of an export file to a queue (lines up to 8 MiB)
  ui [-addr A] [-read-only] [-queue-prefix P]   the web console (sqs-redrive ui -h)
  native start DLQ [--to QUEUE] [--max-per-second N] [--wait]
  native status DLQ             SQS's own move tasks (no filter, no dry run)
  native cancel DLQ [--handle H]
  version                       the version, VCS revision and modified flag this binary was built from

filters (peek, move, export; combinable, all must match):
  --class C[,C]        failure class (permanent, max_attempts, panic, key_reuse, outcome_unknown, or your own;
                       none = no failure record)
  --error RE           regular expression on the failure's error text
  --attr NAME=VALUE    message attribute equal to VALUE (NAME~RE: matches RE; NAME alone: present)
  --body-match RE      regular expression on the body
  --json-field P=V     field P (dot path) of a JSON body equal to V (P~RE: matches RE); when the body
                       is an SNS notification or EventBridge event, P is also looked up in the
                       message inside it (SNS Message, EventBridge detail): either may match
  --older-than D       failed (or arrived in the DLQ) more than D ago (90m, 2h, 7d; ages print as 2h5m0s)
  --newer-than D       ... less than D ago
  --filter EXPR        any of the above as an expression: class=permanent, error~timeout,
                       attr:tenant=acme, body~RE, json:order.status=failed, age>1h

global flags (before or after the arguments):
  --region R --profile P --endpoint-url URL   as in the AWS CLI (the endpoint also comes from
                                              AWS_ENDPOINT_URL_SQS; never from a queue URL)
  --json                                      machine-readable output (JSON lines)
  --visibility-timeout D                      how long looked-at messages stay hidden (30s)

Queues are given by name or URL. Commands that change queues ask for confirmation on a terminal
and need --yes otherwise. Exit codes: 0 ok, 1 failure (a message failed, refused or not deleted),
2 usage, 3 no match (peek, move, export: the filters matched none of the messages in the DLQ; stderr
lists what is there: classes, body shapes and field names).
`

// globals are the flags every command takes.
type globals struct {
	region, profile, endpoint string
	json                      bool
	visibility                time.Duration
}

// app is one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	g              globals
	// syncDir makes a directory's entries durable (fsync); a test hook.
	syncDir func(dir string) error
	// progressHook, when set (by tests only), sees every progress report.
	progressHook func(redrive.Progress)
	// region and endpoint are where the client looks, for messages.
	region, endpoint string
	// key is the dead-letter signing key (--signing-key-env); nil: none.
	key []byte
	// buildInfo reads the binary's build information; nil:
	// debug.ReadBuildInfo. A test hook.
	buildInfo func() (*debug.BuildInfo, bool)
	// s3 fetches the bodies `peek --body` shows of messages stored in S3;
	// set from the AWS configuration when nil (tests set it).
	s3 payload.GetAPI
}

// run is the whole command: it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return (&app{stdin: stdin, stdout: stdout, stderr: stderr, syncDir: syncDir}).run(ctx, args)
}

// syncDir fsyncs a directory, so that a file created in it survives a
// crash of the machine.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// run runs one command and returns the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	stdout, stderr := a.stdout, a.stderr
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "list":
		err = a.list(ctx, args[1:])
	case "peek":
		err = a.peek(ctx, args[1:])
	case "move":
		err = a.move(ctx, args[1:])
	case "export":
		err = a.export(ctx, args[1:])
	case "import":
		err = a.imp(ctx, args[1:])
	case "native":
		err = a.native(ctx, args[1:])
	case "version", "--version":
		err = a.version(args[1:])
	case "ui":
		err = a.ui(ctx, args[1:])
	default:
		err = usageError("unknown command %q", args[0])
	}
	var noMatch *noMatchError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0
	case errors.As(err, &noMatch):
		noMatch.print(stderr)
		return 3
	case errors.Is(err, errUsage), errors.Is(err, redrive.ErrBadFilter):
		fmt.Fprintf(stderr, "sqs-redrive: %s\nRun 'sqs-redrive help' for usage.\n", printable.Escape(err.Error()))
		return 2
	}
	fmt.Fprintf(stderr, "sqs-redrive: %s\n", printable.Escape(err.Error()))
	return 1
}

// flags returns a flag set with the global flags.
func (a *app) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&a.g.region, "region", "", "AWS region")
	fs.StringVar(&a.g.profile, "profile", "", "shared config profile")
	fs.StringVar(&a.g.endpoint, "endpoint-url", "", "SQS endpoint")
	fs.BoolVar(&a.g.json, "json", false, "JSON lines output")
	fs.DurationVar(&a.g.visibility, "visibility-timeout", 30*time.Second, "visibility of looked-at messages")
	return fs
}

// filterFlags adds the filter flags, all collected as expressions.
func filterFlags(fs *flag.FlagSet, exprs *list) {
	fs.Var(prefixed{exprs, "class="}, "class", "failure class")
	fs.Var(prefixed{exprs, "error~"}, "error", "regexp on the error text")
	fs.Var(prefixed{exprs, "attr:"}, "attr", "NAME=VALUE, NAME~RE or NAME")
	fs.Var(prefixed{exprs, "body~"}, "body-match", "regexp on the body")
	fs.Var(prefixed{exprs, "json:"}, "json-field", "PATH=VALUE or PATH~RE")
	fs.Var(prefixed{exprs, "age>"}, "older-than", "duration")
	fs.Var(prefixed{exprs, "age<"}, "newer-than", "duration")
	fs.Var(exprs, "filter", "filter expression")
}

// args checks the number of positional arguments.
func args(pos []string, want int, shape string) error {
	if len(pos) != want {
		return usageError("want %s, got %d argument(s)", shape, len(pos))
	}
	return nil
}

// command is the shape of a subcommand's start: the positional arguments
// it takes, its own checks of the command line, whether it filters, and
// which argument names the queue it works on.
type command struct {
	// nargs and shape are the positional arguments it takes ("move DLQ").
	nargs int
	shape string
	// check, when not nil, checks the positional arguments and flags
	// before anything is contacted; its errors are usage errors or its own.
	check func(pos []string) error
	// filters, when not nil, holds the filter flags' expressions (see
	// filterFlags), parsed after check.
	filters *list
	// queueArg is the index of the argument that names the queue; -1: none.
	queueArg int
}

// started is what a subcommand works with once its command line was read
// and SQS reached.
type started struct {
	pos     []string
	filters []redrive.Filter
	r       *redrive.Redriver
	queue   redrive.Queue // pos[queueArg], resolved
}

// start is every subcommand's prologue, in this order: parse the flags
// (the global ones and its own, already defined on fs), check the
// positional arguments, run the command's checks, parse the filters, and
// only then connect to SQS and resolve the queue argument, so that a
// mistake on the command line never costs a request.
func (a *app) start(ctx context.Context, fs *flag.FlagSet, argv []string, c command) (started, error) {
	var s started
	pos, err := parse(fs, argv)
	if err != nil {
		return s, err
	}
	if err := args(pos, c.nargs, c.shape); err != nil {
		return s, err
	}
	s.pos = pos
	if c.check != nil {
		if err := c.check(pos); err != nil {
			return s, err
		}
	}
	if c.filters != nil {
		if s.filters, err = redrive.ParseFilters(*c.filters...); err != nil {
			return s, err
		}
	}
	if s.r, err = a.redriver(ctx); err != nil {
		return s, err
	}
	if c.queueArg >= 0 {
		if s.queue, err = a.queue(ctx, s.r, pos[c.queueArg]); err != nil {
			return s, err
		}
	}
	return s, nil
}

// redriver connects to SQS as the flags and the environment say.
func (a *app) redriver(ctx context.Context) (*redrive.Redriver, error) {
	// The SDK's own warnings (an unread response body on a cancelled long
	// poll) are noise for people; errors are reported as errors.
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if a.g.region != "" {
		opts = append(opts, config.WithRegion(a.g.region))
	}
	if a.g.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(a.g.profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if a.g.endpoint != "" {
			o.BaseEndpoint = aws.String(a.g.endpoint)
		}
	})
	a.region = cfg.Region
	if a.s3 == nil {
		a.s3 = s3client.New(cfg)
	}
	a.endpoint = aws.ToString(client.Options().BaseEndpoint)
	if a.endpoint == "" {
		a.endpoint = "the region's AWS endpoint"
	}
	if a.g.visibility < time.Second || a.g.visibility > 12*time.Hour {
		return nil, usageError("--visibility-timeout %s is outside 1s..12h", a.g.visibility)
	}
	return redrive.New(redrive.Config{Client: client, VisibilityTimeout: a.g.visibility.Round(time.Second), SigningKey: a.key})
}

// queue resolves a queue; an unknown one is reported with where it was
// looked for and how to see what is there.
func (a *app) queue(ctx context.Context, r *redrive.Redriver, nameOrURL string) (redrive.Queue, error) {
	q, err := r.Queue(ctx, nameOrURL)
	if errors.Is(err, redrive.ErrUnknownQueue) {
		what := strings.TrimPrefix(strings.TrimPrefix(err.Error(), redrive.ErrUnknownQueue.Error()), ": ")
		region := a.region
		if region == "" {
			region = "(none set)"
		}
		return q, fmt.Errorf("unknown queue %s in region %s at %s: run 'sqs-redrive list' to see the queues there", what, region, a.endpoint)
	}
	return q, err
}

// emit writes one JSON line.
func (a *app) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(a.stderr, "sqs-redrive: encode output: %v\n", err)
		return
	}
	a.stdout.Write(append(printable.JSON(b), '\n'))
}

func (a *app) list(ctx context.Context, argv []string) error {
	s, err := a.start(ctx, a.flags("list"), argv, command{nargs: 0, shape: "no arguments", queueArg: -1})
	if err != nil {
		return err
	}
	dlqs, err := s.r.List(ctx, nil)
	if err != nil {
		return err
	}
	if a.g.json {
		for _, d := range dlqs {
			srcs := make([]string, len(d.Sources))
			for i, s := range d.Sources {
				srcs[i] = s.Name
			}
			a.emit(map[string]any{"dlq": d.Name, "url": d.URL, "fifo": d.FIFO, "messages": d.Messages,
				"in_flight": d.InFlight, "oldest_age_seconds": d.OldestAge.Seconds(), "sources": srcs})
		}
		return nil
	}
	return printDLQs(a.stdout, dlqs)
}

// printDLQs prints the table of list for people, queue names escaped
// (printable.Escape).
func printDLQs(w io.Writer, dlqs []redrive.DLQ) error {
	if len(dlqs) == 0 {
		fmt.Fprintln(w, "no dead-letter queues")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "DLQ\tMESSAGES\tIN FLIGHT\tOLDEST\tSOURCES")
	for _, d := range dlqs {
		srcs := make([]string, len(d.Sources))
		for i, s := range d.Sources {
			srcs[i] = printable.Escape(s.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable.Escape(d.Name), countText(d.Messages), countText(d.InFlight), age(d.OldestAge), strings.Join(srcs, ","))
	}
	return tw.Flush()
}

// countText formats an approximate count; an unknown one (-1: SQS returned
// something that is not a number) shows as "?".
func countText(n int) string {
	if n < 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

// upTo says how many messages a command may change, for its prompt: the
// smaller of the queue's count and max (0: no max); "all the" when neither
// is known.
func upTo(n, max int) string {
	switch {
	case n < 0 && max <= 0:
		return "all the"
	case n < 0:
		return fmt.Sprintf("up to %d", max)
	case max > 0:
		return fmt.Sprintf("up to %d", min(n, max))
	}
	return fmt.Sprintf("up to %d", n)
}

// age formats an age for people, always as a Go duration (which
// --older-than reads): to the second under an hour, to the minute above.
func age(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

func (a *app) peek(ctx context.Context, argv []string) error {
	fs := a.flags("peek")
	n := fs.Int("n", 10, "how many messages")
	body := fs.Bool("body", false, "show bodies")
	var exprs list
	filterFlags(fs, &exprs)
	s, err := a.start(ctx, fs, argv, command{nargs: 1, shape: "peek DLQ", filters: &exprs, check: func([]string) error {
		if *n < 1 {
			return usageError("-n must be at least 1")
		}
		return nil
	}})
	if err != nil {
		return err
	}
	r, dlq := s.r, s.queue
	var seen *redrive.Census
	if len(s.filters) > 0 {
		seen = &redrive.Census{}
	}
	entries, err := r.Peek(ctx, dlq, redrive.PeekOptions{Max: *n, Filters: s.filters, Census: seen})
	for i, e := range entries {
		m := e.Message
		if a.g.json {
			o := map[string]any{"message_id": m.ID, "age_seconds": e.Age.Seconds(), "class": e.Class(),
				"receive_count": m.ReceiveCount, "attributes": attrText(e)}
			if f := e.Failure; f != nil {
				o["error"], o["attempts"], o["source_queue"] = f.Error, f.Attempts, f.SourceQueue
				o["original_message_id"], o["failed_at"] = f.OriginalMessageID, f.FailedAt
				if f.Step != "" {
					o["step"] = f.Step
				}
			}
			if h := e.History; h != nil {
				o["redrive_count"], o["redriven_at"], o["redriven_from"] = h.Count, h.RedrivenAt, h.DLQ
			}
			if m.GroupID != "" {
				o["group_id"] = m.GroupID
			}
			if arn := m.SystemAttributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)]; arn != "" {
				o["dead_letter_queue_source_arn"] = arn
			}
			if p, size, ok := pointerOf(m); ok {
				o["payload"], o["payload_bytes"] = p.String(), size
			}
			if *body {
				o["body"] = m.Body
				if text, ferr := a.fetchBody(ctx, m); ferr != nil {
					o["body_error"] = ferr.Error()
				} else {
					o["body"] = text
				}
			}
			a.emit(o)
			continue
		}
		if *body && payload.Needed(m.Attributes) {
			text, ferr := a.fetchBody(ctx, m)
			if ferr != nil {
				text = m.Body + "\n(the body itself could not be read: " + ferr.Error() + ")"
			}
			printEntry(a.stdout, i+1, len(entries), e, true, text)
			continue
		}
		printEntry(a.stdout, i+1, len(entries), e, *body)
	}
	if err == nil && !a.g.json {
		fmt.Fprintf(a.stderr, "%d message(s) shown; all are visible again\n", len(entries))
		if dlq.FIFO {
			fmt.Fprintln(a.stderr, "FIFO: only the first messages of each group can be seen while the earlier ones are held")
		}
	}
	if err == nil {
		if srcs, serr := r.Sources(ctx, dlq); serr == nil && len(srcs) == 0 {
			fmt.Fprintf(a.stderr, "note: %s is not a dead-letter queue: no queue's RedrivePolicy names it\n", printable.Escape(dlq.Name))
		}
	}
	if err != nil {
		return err
	}
	return nothingMatched(s.filters, seen, len(entries))
}

// printEntry prints one peeked entry (the k-th of n) for people. All but
// the numbers is outside text (a producer writes the body, the attributes
// and the failure record): every rune of it a terminal could act on is
// escaped (printable.Escape), the body's line feeds kept.
//
// A message whose body is in S3 shows its object (s3://bucket/key) and
// size; fetched, when given, is the body to show instead of m.Body (the
// one read from S3 or decompressed).
func printEntry(w io.Writer, k, n int, e redrive.Entry, body bool, fetched ...string) {
	m := e.Message
	esc := printable.Escape
	fmt.Fprintf(w, "--- %d/%d  %s  age %s\n", k, n, esc(m.ID), age(e.Age))
	if id := m.Attribute(sqsmsg.AttrID); id != "" {
		fmt.Fprintf(w, "id:        %s\n", esc(id))
	}
	fmt.Fprintf(w, "class:     %s\n", esc(e.Class()))
	if f := e.Failure; f != nil {
		if f.Step != "" {
			fmt.Fprintf(w, "step:      %s\n", esc(f.Step))
		}
		fmt.Fprintf(w, "error:     %s\nattempts:  %d\nsource:    %s\n", esc(f.Error), f.Attempts, esc(f.SourceQueue))
	}
	if arn := m.SystemAttributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)]; arn != "" {
		fmt.Fprintf(w, "moved by SQS from: %s\n", esc(arn))
	}
	if h := e.History; h != nil {
		fmt.Fprintf(w, "redriven:  %s\n", redriven(*h, time.Now()))
	} else if m.Attribute(redrive.AttrRedrive) != "" {
		fmt.Fprintf(w, "redriven:  ? (its %s attribute is not a redrive history)\n", redrive.AttrRedrive)
	}
	if m.GroupID != "" {
		fmt.Fprintf(w, "group:     %s\n", esc(m.GroupID))
	}
	names := make([]string, 0, len(m.Attributes))
	for k := range m.Attributes {
		names = append(names, esc(k))
	}
	sort.Strings(names)
	fmt.Fprintf(w, "attributes: %s\n", strings.Join(names, ", "))
	if p, size, ok := pointerOf(m); ok {
		fmt.Fprintf(w, "payload:   %s (%s bytes)\n", esc(p.String()), esc(size))
	}
	if enc := payload.Encoding(m.Attributes); enc != "" {
		fmt.Fprintf(w, "encoding:  %s\n", esc(enc))
	}
	if body {
		text := m.Body
		if len(fetched) > 0 {
			text = fetched[0]
		}
		fmt.Fprintf(w, "body:\n%s\n", printable.Lines(text))
	}
}

// pointerOf returns the S3 object a message's body is in, with the size
// its attribute gives ("?" when it gives none).
func pointerOf(m *sqsmsg.Message) (payload.Pointer, string, bool) {
	if !payload.IsPointer(m.Attributes) {
		return payload.Pointer{}, "", false
	}
	p, err := payload.ParsePointer(m.Body)
	if err != nil {
		return payload.Pointer{}, "", false
	}
	size := m.Attribute(payload.AttrSize)
	if size == "" {
		size = m.Attribute(payload.AttrLegacySize)
	}
	if size == "" {
		size = "?"
	}
	return p, size, true
}

// fetchBody reads the body of a message stored in S3 or compressed, at
// most 64 MiB of it.
func (a *app) fetchBody(ctx context.Context, m *sqsmsg.Message) (string, error) {
	res, err := payload.Decoder{S3: a.s3}.Decode(ctx, m.Body, m.Attributes)
	if err != nil {
		return "", err
	}
	return res.Body, nil
}

// redriven describes a redrive history for people: how many times, when
// last and out of which DLQ (escaped: a producer can write any history).
func redriven(h redrive.History, now time.Time) string {
	s := fmt.Sprintf("%d time(s)", h.Count)
	if !h.RedrivenAt.IsZero() {
		if d := now.Sub(h.RedrivenAt); d >= time.Second {
			s += ", last " + age(d) + " ago"
		} else {
			s += ", last just now"
		}
	}
	if h.DLQ != "" {
		s += ", out of " + printable.Escape(h.DLQ)
	}
	return s
}

// attrText returns an entry's attributes as text (binary ones as a size).
func attrText(e redrive.Entry) map[string]string {
	out := map[string]string{}
	for k, v := range e.Message.Attributes {
		if v.StringValue != nil {
			out[k] = *v.StringValue
		} else {
			out[k] = fmt.Sprintf("(%d bytes)", len(v.BinaryValue))
		}
	}
	return out
}

func (a *app) move(ctx context.Context, argv []string) error {
	fs := a.flags("move")
	to := fs.String("to", "", "destination queue")
	dry := fs.Bool("dry-run", false, "show what would move, change nothing")
	maxN := fs.Int("max", 0, "move at most N messages")
	rate := fs.Float64("rate", 0, "messages per second")
	yes := fs.Bool("yes", false, "do not ask")
	keyEnv := fs.String("signing-key-env", "", "environment variable holding the consumers' dead-letter signing key")
	var exprs list
	filterFlags(fs, &exprs)
	s, err := a.start(ctx, fs, argv, command{nargs: 1, shape: "move DLQ", filters: &exprs, check: func([]string) error {
		if *maxN < 0 || *rate < 0 {
			return usageError("--max and --rate must not be negative")
		}
		return a.signingKey(*keyEnv)
	}})
	if err != nil {
		return err
	}
	r, dlq, filters := s.r, s.queue, s.filters
	if *to != "" {
		dest, err := a.queue(ctx, r, *to)
		if err != nil {
			return err
		}
		*to = dest.URL
	}
	if !*dry {
		n := upTo(dlq.Messages, *maxN)
		dest := "their source queues"
		if *to != "" {
			dest = *to
		}
		q := fmt.Sprintf("Move %s message(s) from %s to %s?", n, printable.Escape(dlq.Name), printable.Escape(dest))
		if len(filters) > 0 {
			q = fmt.Sprintf("Move %s message(s) matching %d filter(s) from %s to %s?", n, len(filters), printable.Escape(dlq.Name), printable.Escape(dest))
		}
		if err := a.confirm(q, *yes); err != nil {
			return err
		}
	}
	bar := a.newBar("moving")
	sum, err := r.Move(ctx, dlq, redrive.MoveOptions{To: *to, Filters: filters, Max: *maxN, Rate: *rate, DryRun: *dry, Progress: bar.update})
	bar.done()
	if err != nil && sum.Moved == 0 && (errors.Is(err, redrive.ErrKindMismatch) || errors.Is(err, redrive.ErrNoDestination) || errors.Is(err, redrive.ErrUnknownQueue)) {
		return err // nothing moved for want of a destination: the error says it all
	}
	a.summary("move", dlq.Name, sum)
	if err != nil {
		return err
	}
	if err := failures(sum); err != nil {
		return err
	}
	return nothingMatched(filters, sum.Seen, sum.Matched+sum.Refused)
}

// signingKey reads the dead-letter signing key from the environment
// variable named (never from the command line, where other users of the
// machine can read it); "" names none.
func (a *app) signingKey(name string) error {
	if name == "" {
		return nil
	}
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return usageError("--signing-key-env %s: the environment variable %s is not set", printable.Escape(name), printable.Escape(name))
	}
	if err := deadletter.CheckSigningKey([]byte(v)); err != nil {
		return usageError("--signing-key-env %s: %v", printable.Escape(name), err)
	}
	a.key = []byte(v)
	return nil
}

// failures turns failed messages into an error (exit code 1).
func failures(sum redrive.Summary) error {
	switch {
	case sum.Failed > 0:
		return fmt.Errorf("%d message(s) could not be sent and stayed in the DLQ", sum.Failed)
	case sum.Refused > 0:
		return fmt.Errorf("%d message(s) were refused and stayed in the DLQ: nothing a producer cannot forge says they came from a source of the DLQ (see the notes; --to sends them to a queue you name, --signing-key-env trusts records the consumers signed)", sum.Refused)
	case sum.DeleteFailed > 0:
		return fmt.Errorf("%d message(s) were sent but not deleted from the DLQ: a later run moves them again (the consumer's dedupe drops the duplicate)", sum.DeleteFailed)
	}
	return nil
}

// noMatchError reports filters that matched none of the messages looked
// at (exit code 3), with what those messages were.
type noMatchError struct {
	filters []redrive.Filter
	seen    *redrive.Census
}

// nothingMatched returns a *noMatchError when filters were given, the
// command looked at messages and matched is 0; else nil.
func nothingMatched(filters []redrive.Filter, seen *redrive.Census, matched int) error {
	if len(filters) == 0 || seen == nil || seen.Messages == 0 || matched > 0 {
		return nil
	}
	return &noMatchError{filters: filters, seen: seen}
}

func (e *noMatchError) Error() string {
	exprs := make([]string, len(e.filters))
	for i, f := range e.filters {
		exprs[i] = f.String()
	}
	return fmt.Sprintf("no message matched %s among the %d message(s) looked at", strings.Join(exprs, " and "), e.seen.Messages)
}

// details says what the messages looked at were, one line each (their
// names are outside text: counts escapes them).
func (e *noMatchError) details() []string {
	c := e.seen
	lines := []string{"classes: " + counts(c.ByClass)}
	if len(c.Bodies) == 0 {
		return lines
	}
	of := "the JSON bodies"
	if c.Sampled < c.Messages {
		of = fmt.Sprintf("the JSON bodies among the first %d", c.Sampled)
	}
	b := "bodies: " + counts(c.Bodies)
	if c.Sampled < c.Messages {
		b += fmt.Sprintf(" (of the first %d)", c.Sampled)
	}
	jsonFilter := slices.ContainsFunc(e.filters, func(f redrive.Filter) bool { return f.Kind == redrive.FilterJSON })
	if jsonFilter && c.Bodies[redrive.BodySNS]+c.Bodies[redrive.BodyEventBridge] > 0 {
		b += "; json filters look at the body and at the message inside an SNS or EventBridge envelope"
	}
	lines = append(lines, b)
	if len(c.Fields) > 0 {
		lines = append(lines, "fields: "+counts(c.Fields)+" (top level of "+of+")")
	}
	if len(c.InnerFields) > 0 {
		lines = append(lines, "inside envelopes: "+counts(c.InnerFields))
	}
	return lines
}

// print writes the error and its details for people, escaped.
func (e *noMatchError) print(w io.Writer) {
	fmt.Fprintf(w, "sqs-redrive: %s\n", printable.Escape(e.Error()))
	for _, l := range e.details() {
		fmt.Fprintf(w, "  %s\n", printable.Escape(l))
	}
}

// confirm asks once on a terminal; elsewhere it needs --yes.
func (a *app) confirm(question string, yes bool) error {
	if yes {
		return nil
	}
	if !isTerminal(a.stdin) {
		return usageError("stdin is not a terminal: pass --yes to go ahead (or --dry-run to look first)")
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New("aborted: nothing was changed")
}

// summary prints the end-of-command summary.
func (a *app) summary(command, queue string, sum redrive.Summary) {
	rate := sum.Rate()
	if a.g.json {
		b, _ := json.Marshal(sum)
		var o map[string]any
		_ = json.Unmarshal(b, &o)
		o["command"], o["queue"] = command, queue
		a.emit(o)
		return
	}
	verb := map[string]string{"move": "moved", "export": "exported", "import": "imported"}[command]
	if sum.DryRun {
		fmt.Fprintf(a.stdout, "dry run: would move %d, skip %d", sum.Matched, sum.Skipped)
		if sum.Refused > 0 {
			fmt.Fprintf(a.stdout, ", refuse %d", sum.Refused)
		}
		fmt.Fprintf(a.stdout, "; nothing was changed (%s)\n", sum.Elapsed.Round(time.Millisecond))
	} else {
		fmt.Fprintf(a.stdout, "%s %d, skipped %d, failed %d", verb, sum.Moved, sum.Skipped, sum.Failed)
		if sum.Refused > 0 {
			fmt.Fprintf(a.stdout, ", refused %d", sum.Refused)
		}
		if sum.CameBack > 0 {
			fmt.Fprintf(a.stdout, ", came back %d", sum.CameBack)
		}
		fmt.Fprintf(a.stdout, " in %s (%.1f msg/s)\n", sum.Elapsed.Round(time.Millisecond), rate)
	}
	if len(sum.ByClass) > 0 {
		fmt.Fprintf(a.stdout, "  by class: %s\n", counts(sum.ByClass))
	}
	if len(sum.ByDestination) > 0 {
		fmt.Fprintf(a.stdout, "  by destination: %s\n", counts(sum.ByDestination))
	}
	if sum.DeleteFailed > 0 {
		fmt.Fprintf(a.stdout, "  sent but not deleted: %d\n", sum.DeleteFailed)
	}
	for _, n := range sum.Notes {
		fmt.Fprintf(a.stdout, "  note: %s\n", printable.Escape(n))
	}
}

// counts formats a count map, sorted by key.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", printable.Escape(k), m[k])
	}
	return strings.Join(parts, " ")
}

func (a *app) export(ctx context.Context, argv []string) error {
	fs := a.flags("export")
	del := fs.Bool("delete", false, "delete what was written and synced")
	force := fs.Bool("force", false, "overwrite FILE")
	maxN := fs.Int("max", 0, "export at most N messages")
	yes := fs.Bool("yes", false, "do not ask (with --delete)")
	var exprs list
	filterFlags(fs, &exprs)
	s, err := a.start(ctx, fs, argv, command{nargs: 2, shape: "export DLQ FILE", filters: &exprs, check: func(pos []string) error {
		if *maxN < 0 {
			return usageError("--max must not be negative")
		}
		if pos[1] == "-" && *del {
			return usageError("--delete needs a FILE (stdout cannot be synced)")
		}
		return nil
	}})
	if err != nil {
		return err
	}
	r, dlq, filters, pos := s.r, s.queue, s.filters, s.pos
	if *del {
		if err := a.confirm(fmt.Sprintf("Export %s message(s) of %s to %s and delete them from the DLQ?", upTo(dlq.Messages, 0), printable.Escape(dlq.Name), printable.Escape(pos[1])), *yes); err != nil {
			return err
		}
	}
	var w io.Writer = a.stdout
	if pos[1] != "-" {
		mode := os.O_WRONLY | os.O_CREATE | os.O_EXCL
		if *force {
			mode = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		}
		f, err := os.OpenFile(pos[1], mode, 0o600)
		if err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("export file %s exists (pass --force to overwrite)", pos[1])
			}
			return fmt.Errorf("export file: %w", err)
		}
		defer f.Close()
		w = f
		if *del {
			// The file's data is synced before each delete; its directory
			// entry must be durable too, or a crash loses the whole file.
			if err := a.syncDir(filepath.Dir(pos[1])); err != nil {
				return fmt.Errorf("export file: sync directory: %w (nothing was deleted)", err)
			}
		}
	}
	bar := a.newBar("exporting")
	sum, err := r.Export(ctx, dlq, w, redrive.ExportOptions{Filters: filters, Max: *maxN, Delete: *del, Progress: bar.update})
	bar.done()
	if pos[1] == "-" {
		a.stdout = a.stderr // stdout holds the records
	}
	a.summary("export", dlq.Name, sum)
	if err != nil {
		return err
	}
	if sum.DeleteFailed > 0 {
		return failures(sum)
	}
	return nothingMatched(filters, sum.Seen, sum.Matched)
}

func (a *app) imp(ctx context.Context, argv []string) error {
	fs := a.flags("import")
	rate := fs.Float64("rate", 0, "messages per second")
	yes := fs.Bool("yes", false, "do not ask")
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	s, err := a.start(ctx, fs, argv, command{nargs: 2, shape: "import FILE QUEUE", queueArg: 1, check: func(pos []string) (err error) {
		if *rate < 0 {
			return usageError("--rate must not be negative")
		}
		if f, err = os.Open(pos[0]); err != nil {
			return fmt.Errorf("cannot read export file: %w", err)
		}
		return nil
	}})
	if err != nil {
		return err
	}
	r, q, pos := s.r, s.queue, s.pos
	n, err := redrive.CheckRecords(f, q.FIFO)
	if err != nil {
		return fmt.Errorf("export file %s: %w (nothing was sent)", pos[0], err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("export file: %w", err)
	}
	if err := a.confirm(fmt.Sprintf("Send %d message(s) from %s to %s?", n, printable.Escape(pos[0]), printable.Escape(q.Name)), *yes); err != nil {
		return err
	}
	bar := a.newBar("importing")
	sum, err := r.Import(ctx, f, q, redrive.ImportOptions{Rate: *rate, Total: n, Progress: bar.update})
	bar.done()
	a.summary("import", q.Name, sum)
	if err != nil {
		return err
	}
	return failures(sum)
}

func (a *app) native(ctx context.Context, argv []string) error {
	if len(argv) == 0 {
		return usageError("native needs start, status or cancel")
	}
	sub := argv[0]
	fs := a.flags("native " + sub)
	var to, handle *string
	var perSecond *int
	var wait *bool
	switch sub {
	case "start":
		to = fs.String("to", "", "destination (default: each message's source)")
		perSecond = fs.Int("max-per-second", 0, "rate cap (1..500; default: SQS's)")
		wait = fs.Bool("wait", false, "wait until the task ends, showing progress")
	case "status":
	case "cancel":
		handle = fs.String("handle", "", "task handle (default: the DLQ's running task)")
	default:
		return usageError("unknown native command %q (want start, status or cancel)", sub)
	}
	s, err := a.start(ctx, fs, argv[1:], command{nargs: 1, shape: "native " + sub + " DLQ"})
	if err != nil {
		return err
	}
	r, dlq := s.r, s.queue
	switch sub {
	case "start":
		var dest *redrive.Queue
		if *to != "" {
			q, err := a.queue(ctx, r, *to)
			if err != nil {
				return err
			}
			dest = &q
		}
		h, err := r.StartMoveTask(ctx, dlq, dest, *perSecond)
		if err != nil {
			return err
		}
		if a.g.json {
			a.emit(map[string]any{"task_handle": h, "dlq": dlq.Name})
		} else {
			fmt.Fprintf(a.stdout, "started move task %s\n", printable.Escape(h))
		}
		if !*wait {
			return nil
		}
		t, err := r.WaitMoveTask(ctx, dlq, time.Second, func(t redrive.MoveTask) {
			fmt.Fprintf(a.stderr, "%s: moved %d of %d\n", printable.Escape(t.Status), t.Moved, t.ToMove)
		})
		if err != nil {
			return err
		}
		a.task(t)
		if t.Status == "FAILED" {
			return fmt.Errorf("move task failed: %s", t.Failure)
		}
		return nil
	case "status":
		tasks, err := r.MoveTasks(ctx, dlq)
		if err != nil {
			return err
		}
		if len(tasks) == 0 && !a.g.json {
			fmt.Fprintf(a.stdout, "%s has no move tasks\n", printable.Escape(dlq.Name))
		}
		for _, t := range tasks {
			a.task(t)
		}
		return nil
	}
	h := *handle
	if h == "" {
		tasks, err := r.MoveTasks(ctx, dlq)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			if t.Status == "RUNNING" {
				h = t.Handle
				break
			}
		}
		if h == "" {
			return fmt.Errorf("%s has no running move task", dlq.Name)
		}
	}
	moved, err := r.CancelMoveTask(ctx, h)
	if err != nil {
		return err
	}
	if a.g.json {
		a.emit(map[string]any{"task_handle": h, "cancelled": true, "moved": moved})
	} else {
		fmt.Fprintf(a.stdout, "cancelled move task %s after about %d message(s)\n", printable.Escape(h), moved)
	}
	return nil
}

// task prints a move task.
func (a *app) task(t redrive.MoveTask) {
	if a.g.json {
		a.emit(t)
		return
	}
	dest := t.DestinationARN
	if dest == "" {
		dest = "(original sources)"
	}
	esc := printable.Escape
	fmt.Fprintf(a.stdout, "%s  %s  moved %d of %d  to %s  started %s", esc(t.Status), esc(t.Handle), t.Moved, t.ToMove, esc(dest), t.Started.Format(time.RFC3339))
	if t.Failure != "" {
		fmt.Fprintf(a.stdout, "  failure: %s", esc(t.Failure))
	}
	fmt.Fprintln(a.stdout)
}
