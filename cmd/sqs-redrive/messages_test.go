package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestMessages pins what people read: the exact output of commands that
// go wrong, or that show a message, with the test's queue names, the
// endpoint, the region and message ids replaced by {placeholders}.
func TestMessages(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	_, fifoDLQ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t)+"-f", testenv.QueueOptions{FIFO: true})
	loner, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-loner", testenv.QueueOptions{})
	putDead(t, client, dlq, src, 1, "permanent")
	putDead(t, client, loner, src, 1, "permanent")
	// forged records a source_queue (loner) that does not feed it.
	_, forged := testenv.QueueWithDLQ(t, client, testenv.Prefix(t)+"-forged", testenv.QueueOptions{})
	putDead(t, client, forged, loner, 1, "permanent")
	missing := "no-such-queue-" + testenv.Name("x")
	names := map[string]string{src: "{src-url}", loner: "{loner-url}", name(forged): "{forged}", name(dlq): "{dlq}", name(src): "{src}", name(fifoDLQ): "{fifo-dlq}", name(loner): "{loner}", missing: "{missing}",
		os.Getenv("AWS_ENDPOINT_URL_SQS"): "{endpoint}", os.Getenv("AWS_REGION"): "{region}"}
	ids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	elapsed := regexp.MustCompile(` in [0-9.]+[µm]?s( \([0-9.]+ msg/s\))?`)
	progress := regexp.MustCompile(`(?m)^moving: received .*\n`) // a slow run prints progress every 2 s
	hourAge := regexp.MustCompile(`age 1h[0-9]+m0s`)
	normal := func(s string) string {
		// Longest first: a queue URL contains the endpoint and the name.
		for _, k := range []string{src, loner, name(forged), name(fifoDLQ), name(loner), name(dlq), name(src), missing, os.Getenv("AWS_ENDPOINT_URL_SQS"), os.Getenv("AWS_REGION")} {
			s = strings.ReplaceAll(s, k, names[k])
		}
		s = progress.ReplaceAllString(s, "")
		s = hourAge.ReplaceAllString(s, "age 1h0m0s") // dead letters failed an hour before the put; a slow run adds minutes
		s = elapsed.ReplaceAllString(s, " in {elapsed}")
		return ids.ReplaceAllString(s, "{id}")
	}
	for _, c := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"unknown queue", []string{"peek", missing}, 1, "",
			"sqs-redrive: unknown queue {missing} in region {region} at {endpoint}: run 'sqs-redrive list' to see the queues there\n"},
		{"unknown destination", []string{"move", dlq, "--to", missing, "--dry-run"}, 1, "",
			"sqs-redrive: unknown queue {missing} in region {region} at {endpoint}: run 'sqs-redrive list' to see the queues there\n"},
		{"misspelt class", []string{"move", dlq, "--class", "permanant", "--dry-run"}, 2, "",
			"sqs-redrive: redrive: bad filter \"class=permanant\": unknown class \"permanant\" (did you mean \"permanent\"?)\nRun 'sqs-redrive help' for usage.\n"},
		{"malformed class", []string{"peek", dlq, "--filter", "class==x"}, 2, "",
			"sqs-redrive: redrive: bad filter \"class==x\": \"=x\" is not a class name (letters, digits, '_', '-' and '.'; known: permanent, max_attempts, panic, key_reuse, payload, outcome_unknown, none)\nRun 'sqs-redrive help' for usage.\n"},
		{"impossible destination, dry run", []string{"move", fifoDLQ, "--to", src, "--dry-run"}, 1, "",
			"sqs-redrive: redrive: queue kinds differ: {fifo-dlq} is FIFO and {src} is a standard queue: the order within groups would be lost\n"},
		{"refused destination", []string{"move", forged, "--yes"}, 1,
			"moved 0, skipped 0, failed 0, refused 1 in {elapsed}\n" +
				"  note: redrive: destination refused: message {id} records source queue \"{loner-url}\", which is not a source queue of {forged} in its account and region: pass a destination (--to) to move it anyway\n",
			"sqs-redrive: 1 message(s) were refused and stayed in the DLQ: nothing a producer cannot forge says they came from a source of the DLQ (see the notes; --to sends them to a queue you name, --signing-key-env trusts records the consumers signed)\n"},
		{"peek", []string{"peek", dlq}, 0,
			"--- 1/1  {id}  age 1h0m0s\nid:        job-permanent-0\nclass:     permanent\nerror:     boom permanent\nattempts:  3\nsource:    {src-url}\nattributes: sqsonce-failure, sqsonce-id\n",
			"1 message(s) shown; all are visible again\n"},
		{"peek at a queue that is nobody's DLQ", []string{"peek", loner}, 0,
			"--- 1/1  {id}  age 1h0m0s\nid:        job-permanent-0\nclass:     permanent\nerror:     boom permanent\nattempts:  3\nsource:    {src-url}\nattributes: sqsonce-failure, sqsonce-id\n",
			"1 message(s) shown; all are visible again\nnote: {loner} is not a dead-letter queue: no queue's RedrivePolicy names it\n"},
	} {
		code, out, errOut := cli(t, c.args...)
		if code != c.code || normal(out) != c.stdout || normal(errOut) != c.errs {
			t.Errorf("%s: exit %d (want %d)\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s\nas printed:\n%s%s", c.name, code, c.code, normal(out), c.stdout, normal(errOut), c.errs, out, errOut)
		}
	}
}

// Ages are printed one way, as Go durations (which --older-than reads).
func TestAgeFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "-"},
		{45*time.Second + 400*time.Millisecond, "45s"},
		{3 * time.Minute, "3m0s"},
		{3*time.Minute + 20*time.Second, "3m20s"},
		{2*time.Hour + 3*time.Minute + 10*time.Second, "2h3m0s"},
		{50*time.Hour + 20*time.Minute + 40*time.Second, "50h21m0s"},
	} {
		if got := age(c.d); got != c.want {
			t.Errorf("age(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}
