package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// hostile reports a rune a terminal may act on rather than show: C0
// controls, DEL, C1 controls, the bidi embeddings, overrides and isolates,
// and a byte that is not UTF-8.
func hostile(r rune, size int) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		(r == utf8.RuneError && size == 1)
}

// checkLines fails the test for every line of out holding a hostile rune.
func checkLines(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		for i := 0; i < len(line); {
			r, size := utf8.DecodeRuneInString(line[i:])
			if hostile(r, size) {
				t.Errorf("%s: a line holds %q at byte %d: %q", what, r, i, line)
				break
			}
			i += size
		}
	}
}

// Attacker-written text (the failure record's error, class and
// source_queue, the body, attribute values) reaches people through peek,
// move and their notes: every control character in it is escaped, so an
// ANSI or OSC sequence cannot rewrite what the operator reads before
// confirming a move.
func TestHostileTextIsEscaped(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	// JSON escapes put characters SQS refuses in a body (ESC, BEL) into
	// the record as soon as it is parsed.
	const evil = "\x1b]0;owned\x07\x1b[2J\x1b[1A\rclass:     permanent\u009b31m\u202e\u2066\x7f"
	for _, f := range []deadletter.Failure{
		{Error: "boom" + evil, Class: "permanent" + evil, SourceQueue: src, Attempts: 1, OriginalMessageID: "o1", FailedAt: time.Now().UTC()},
		{Error: evil, Class: "x" + evil, SourceQueue: evil + src, Attempts: 1, OriginalMessageID: "o2", FailedAt: time.Now().UTC()},
	} {
		b, _ := json.Marshal(f)
		_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl:    aws.String(dlq),
			MessageBody: aws.String("body\r\u009b2J\u202eevil\u2069\ttab"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(b))},
				consumer.AttrID:        {DataType: aws.String("String"), StringValue: aws.String("id\r\u009b" + f.OriginalMessageID)},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"peek", dlq, "--body"},
		{"move", dlq, "--dry-run"},
		{"move", dlq, "--yes"},
	} {
		code, out, errOut := cli(t, args...)
		if code > 1 || out == "" {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		checkLines(t, strings.Join(args[:1], " ")+" stdout", out)
		checkLines(t, strings.Join(args[:1], " ")+" stderr", errOut)
	}
}

// FuzzHumanOutput: whatever a producer, a message or a server wrote into
// the fields sqs-redrive shows (ids, class, error, source queue, group,
// attribute names, body, queue names, notes, move tasks, errors), no line
// of its human output holds a rune a terminal acts on.
func FuzzHumanOutput(f *testing.F) {
	for _, s := range []string{"plain", "\x1b]0;owned\x07\x1b[2J", "\r\n\t", "\u009b31m\u202e\u2066\x7f", "\xff\xfe", "\x1b[1A\rclass:     permanent"} {
		f.Add(s, "permanent", "body")
		f.Add("m-1", s, s)
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var out bytes.Buffer
		m := &consumer.Message{ID: a, Body: c, GroupID: b, SystemAttributes: map[string]string{"DeadLetterQueueSourceArn": c}, Attributes: map[string]types.MessageAttributeValue{
			consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(b)},
			a:               {DataType: aws.String("String"), StringValue: aws.String(c)},
		}}
		e := redrive.Entry{Message: m, Failure: &deadletter.Failure{Error: c, Class: b, SourceQueue: a, Attempts: 2}, Age: time.Minute,
			History: &redrive.History{Count: 2, RedrivenAt: time.Now().Add(-time.Hour), DLQ: b}}
		printEntry(&out, 1, 1, e, true)
		printEntry(&out, 1, 1, redrive.Entry{Message: m}, false)
		if err := printDLQs(&out, []redrive.DLQ{{Queue: redrive.Queue{Name: a}, Sources: []redrive.Queue{{Name: b}, {Name: c}}}}); err != nil {
			t.Fatal(err)
		}
		app := &app{stdout: &out, stderr: &out}
		sum := redrive.Summary{Moved: 1, Refused: 1, ByClass: map[string]int{b: 1}, ByDestination: map[string]int{a: 1}, Notes: []string{c, "x " + a}}
		app.summary("move", a, sum)
		sum.DryRun = true
		app.summary("export", b, sum)
		app.task(redrive.MoveTask{Status: a, Handle: b, DestinationARN: c, Failure: a + c})
		flt, _ := redrive.ParseFilters("json:x=1", "class=permanent")
		seen := &redrive.Census{Messages: 2, Sampled: 2, ByClass: map[string]int{b: 1, "permanent": 1},
			Bodies: map[string]int{redrive.BodySNS: 1, redrive.BodyJSON: 1}, Fields: map[string]int{a: 1}, InnerFields: map[string]int{c: 1}}
		var nm *noMatchError
		if errors.As(nothingMatched(flt, seen, 0), &nm) {
			nm.print(&out)
		} else {
			t.Fatal("no noMatchError")
		}
		checkLines(t, "human output", out.String())

		// An unknown command is printed back in its error.
		if !slices.Contains([]string{"list", "peek", "move", "export", "import", "native", "version", "--version", "help", "-h", "-help", "--help"}, a) {
			var stdout, stderr bytes.Buffer
			run(context.Background(), []string{a}, strings.NewReader(""), &stdout, &stderr)
			checkLines(t, "error", stdout.String()+stderr.String())
		}
	})
}
