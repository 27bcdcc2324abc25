package redrive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

func TestMoveAll(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	want := seq("all", 25, src)
	putDead(t, client, dlq, false, want...)
	r := newRedriver(t, client)
	var reports atomic.Int32
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{Progress: func(redrive.Progress) { reports.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Moved != 25 || sum.Failed != 0 || sum.Skipped != 0 || sum.ByClass[consumer.ClassPermanent] != 25 {
		t.Fatalf("summary %+v", sum)
	}
	if reports.Load() == 0 {
		t.Fatal("no progress reported")
	}
	if n := total(t, client, dlq); n != 0 {
		t.Fatalf("dlq still has %d", n)
	}
	got := drain(t, client, src)
	if !slices.Equal(bodies(got), bodyList(want)) {
		t.Fatalf("source got %v, want %v", bodies(got), bodyList(want))
	}
	for _, m := range got {
		if _, ok := m.MessageAttributes[deadletter.AttrFailure]; ok {
			t.Fatal("moved message still carries sqsonce-failure")
		}
		var h redrive.History
		if err := json.Unmarshal([]byte(aws.ToString(m.MessageAttributes[redrive.AttrRedrive].StringValue)), &h); err != nil || h.Count != 1 || h.LastFailure == nil || h.LastFailure.Error != "boom" {
			t.Fatalf("redrive history %v (%v)", h, err)
		}
		if aws.ToString(m.MessageAttributes[consumer.AttrID].StringValue) == "" {
			t.Fatal("sqsonce-id lost")
		}
	}
}

func bodyList(ds []dead) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.body
	}
	slices.Sort(out)
	return out
}

func TestMoveFilters(t *testing.T) {
	t.Parallel()
	str := func(s string) map[string]types.MessageAttributeValue {
		return map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String(s)}}
	}
	// Each case: the messages, and the filters; bodies starting with "yes"
	// must move, the others stay.
	cases := []struct {
		name    string
		filters []string
		msgs    []dead
	}{
		{"class", []string{"class=permanent"}, []dead{
			{body: "yes-1", class: consumer.ClassPermanent}, {body: "no-1", class: consumer.ClassMaxAttempts}, {body: "no-2", noFail: true}}},
		{"error", []string{"error~time(d )?out"}, []dead{
			{body: "yes-1", class: "permanent", err: "db timeout"}, {body: "yes-2", class: "permanent", err: "timed out"}, {body: "no-1", class: "permanent", err: "bad input"}}},
		{"attr", []string{"attr:tenant=acme"}, []dead{
			{body: "yes-1", class: "permanent", attrs: str("acme")}, {body: "no-1", class: "permanent", attrs: str("acme2")}, {body: "no-2", class: "permanent"}}},
		{"body", []string{`body~"kind":"refund"`}, []dead{
			{body: `yes-1 {"kind":"refund"}`, class: "permanent"}, {body: `no-1 {"kind":"order"}`, class: "permanent"}}},
		{"json", []string{"json:order.status=failed"}, []dead{
			{body: `{"yes":1,"order":{"status":"failed"}}`, class: "permanent"}, {body: `{"no":1,"order":{"status":"ok"}}`, class: "permanent"}, {body: "no-3 not json", class: "permanent"}}},
		{"age", []string{"age>1h"}, []dead{
			{body: "yes-1", class: "permanent", age: 2 * time.Hour}, {body: "no-1", class: "permanent", age: time.Minute}}},
		{"combined", []string{"class=permanent", "attr:tenant~^ac", "age<1h"}, []dead{
			{body: "yes-1", class: "permanent", attrs: str("acme")}, {body: "no-1", class: "panic", attrs: str("acme")},
			{body: "no-2", class: "permanent", attrs: str("acme"), age: 3 * time.Hour}, {body: "no-3", class: "permanent", attrs: str("zeta")}}},
	}
	client := testenv.SQS(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
			var yes, no []string
			for i := range c.msgs {
				c.msgs[i].source = src
				if strings.HasPrefix(c.msgs[i].body, "yes") || strings.HasPrefix(c.msgs[i].body, `{"yes"`) {
					yes = append(yes, c.msgs[i].body)
				} else {
					no = append(no, c.msgs[i].body)
				}
			}
			putDead(t, client, dlq, false, c.msgs...)
			filters, err := redrive.ParseFilters(c.filters...)
			if err != nil {
				t.Fatal(err)
			}
			r := newRedriver(t, client)
			sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{Filters: filters})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Moved != len(yes) || sum.Skipped != len(no) || sum.Released != len(no) {
				t.Fatalf("summary %+v, want %d moved, %d skipped", sum, len(yes), len(no))
			}
			if v, f := testenv.Count(t, client, dlq); v != len(no) || f != 0 {
				t.Fatalf("dlq has %d visible, %d in flight; want %d visible", v, f, len(no))
			}
			slices.Sort(yes)
			slices.Sort(no)
			if got := bodies(drain(t, client, src)); !slices.Equal(got, yes) {
				t.Fatalf("moved %q, want %q", got, yes)
			}
			if got := bodies(drain(t, client, dlq)); !slices.Equal(got, no) {
				t.Fatalf("left %q, want %q", got, no)
			}
		})
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	msgs := seq("dry", 12, src)
	for i := range 4 {
		msgs[i].class = consumer.ClassMaxAttempts
	}
	putDead(t, client, dlq, false, msgs...)
	beforeV, beforeF := testenv.Count(t, client, dlq)
	r := newRedriver(t, client)
	sum, err := r.Plan(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.DryRun || sum.Moved != 0 || sum.Matched != 12 || sum.ByClass[consumer.ClassMaxAttempts] != 4 || sum.ByClass[consumer.ClassPermanent] != 8 {
		t.Fatalf("summary %+v", sum)
	}
	name := src[strings.LastIndex(src, "/")+1:]
	if sum.ByDestination[name] != 12 {
		t.Fatalf("by destination %v, want %s=12", sum.ByDestination, name)
	}
	afterV, afterF := testenv.Count(t, client, dlq)
	if afterV != beforeV || afterF != beforeF || afterF != 0 {
		t.Fatalf("counts before %d/%d, after %d/%d", beforeV, beforeF, afterV, afterF)
	}
	if n := total(t, client, src); n != 0 {
		t.Fatalf("dry run sent %d messages", n)
	}
}

func TestMoveMax(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, false, seq("max", 23, src)...)
	r := newRedriver(t, client)
	q := resolve(t, r, dlq)
	for _, step := range []struct{ max, want, left int }{{7, 7, 16}, {10, 10, 6}, {50, 6, 0}} {
		sum, err := r.Move(context.Background(), q, redrive.MoveOptions{Max: step.max})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Moved != step.want {
			t.Fatalf("max %d moved %d, want %d", step.max, sum.Moved, step.want)
		}
		if v, f := testenv.Count(t, client, dlq); v != step.left || f != 0 {
			t.Fatalf("after max %d the dlq has %d visible, %d in flight; want %d", step.max, v, f, step.left)
		}
	}
	if n := len(drain(t, client, src)); n != 23 {
		t.Fatalf("source has %d, want 23", n)
	}
}

// TestMoveRate checks the rate cap on the real server: the k-th batch of 5
// at 5 msg/s is not sent before k seconds from the start (the pacer never
// bursts). Exact pacing is TestPacing's, on a fake clock; here a busy
// machine can only make the move slower, which is not a failure.
func TestMoveRate(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	const n, rate = 25, 5.0
	putDead(t, client, dlq, false, seq("rate", n, src)...)
	r := newRedriver(t, client)
	q := resolve(t, r, dlq)
	var sends []time.Time
	var sent []int
	start := time.Now()
	sum, err := r.Move(context.Background(), q, redrive.MoveOptions{Rate: rate, Progress: func(p redrive.Progress) {
		if p.Phase == redrive.PhaseSent {
			sends = append(sends, time.Now())
			sent = append(sent, p.Moved)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Moved != n {
		t.Fatalf("moved %d", sum.Moved)
	}
	for i, at := range sends {
		// Moving sent[i] messages at rate takes sent[i]/rate; the first
		// batch also waits its turn.
		if earliest := time.Duration(float64(sent[i]) / rate * float64(time.Second)); at.Sub(start) < earliest {
			t.Fatalf("%d messages sent %s after the start, before %s: faster than %.0f msg/s", sent[i], at.Sub(start), earliest, rate)
		}
	}
	if m := len(drain(t, client, src)); m != n {
		t.Fatalf("source has %d", m)
	}
}

func TestMoveFIFOKeepsGroupOrder(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true})
	const groups, per = 5, 6
	var msgs []dead
	for i := range per {
		for g := range groups {
			msgs = append(msgs, dead{body: fmt.Sprintf("g%d-%02d", g, i), group: fmt.Sprintf("g%d", g), class: "permanent", source: src})
		}
	}
	putDead(t, client, dlq, true, msgs...)
	r := newRedriver(t, client)
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Moved != groups*per {
		t.Fatalf("summary %+v", sum)
	}
	got := drain(t, client, src)
	seen := map[string][]string{}
	for _, m := range got {
		g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		seen[g] = append(seen[g], aws.ToString(m.Body))
	}
	for g := range groups {
		name := fmt.Sprintf("g%d", g)
		var want []string
		for i := range per {
			want = append(want, fmt.Sprintf("%s-%02d", name, i))
		}
		if !slices.Equal(seen[name], want) {
			t.Fatalf("group %s arrived as %v, want %v", name, seen[name], want)
		}
	}
}

func TestMoveFIFOFilterBlocksGroup(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true})
	// Group a: 2 permanent, then a panic, then 2 permanent. Group b: 3 permanent.
	var msgs []dead
	for i, c := range []string{"permanent", "permanent", "panic", "permanent", "permanent"} {
		msgs = append(msgs, dead{body: fmt.Sprintf("a-%d", i), group: "a", class: c, source: src})
	}
	for i := range 3 {
		msgs = append(msgs, dead{body: fmt.Sprintf("b-%d", i), group: "b", class: "permanent", source: src})
	}
	putDead(t, client, dlq, true, msgs...)
	r := newRedriver(t, client)
	f, _ := redrive.ParseFilters("class=permanent")
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Moved != 5 || sum.Skipped != 1 {
		t.Fatalf("summary %+v: want a-0, a-1 and group b moved, a-2 skipped", sum)
	}
	if got := bodies(drain(t, client, src)); !slices.Equal(got, []string{"a-0", "a-1", "b-0", "b-1", "b-2"}) {
		t.Fatalf("moved %v", got)
	}
	// a-2 blocks a-3 and a-4: all three stay, in order.
	left := drain(t, client, dlq)
	var lb []string
	for _, m := range left {
		lb = append(lb, aws.ToString(m.Body))
	}
	if !slices.Equal(lb, []string{"a-2", "a-3", "a-4"}) {
		t.Fatalf("left %v", lb)
	}
}

func TestMoveKeepsAttributesByteForByte(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	attrs := map[string]types.MessageAttributeValue{
		"s":        {DataType: aws.String("String"), StringValue: aws.String("  spaced\ttabs \u00e9\u4e16\ufffd ")},
		"n":        {DataType: aws.String("Number"), StringValue: aws.String("-12.50e3")},
		"bin":      {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 0xff, 0xfe, '\n', 0x80}},
		"custom":   {DataType: aws.String("String.json"), StringValue: aws.String(`{"a":[1,2]}`)},
		"bincust":  {DataType: aws.String("Binary.gz"), BinaryValue: []byte{0x1f, 0x8b, 8}},
		"trace-id": {DataType: aws.String("String"), StringValue: aws.String("Root=1-abc")},
	}
	body := "line1\r\nline2\t<xml attr=\"&amp;\"/> \u00e9\u4e16\ufffd \\u0000 end  "
	putDead(t, client, dlq, false, dead{body: body, class: "permanent", source: src, attrs: attrs, id: "fixed-id"})
	r := newRedriver(t, client)
	if _, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{}); err != nil {
		t.Fatal(err)
	}
	got := drain(t, client, src)
	if len(got) != 1 {
		t.Fatalf("got %d messages", len(got))
	}
	m := got[0]
	if aws.ToString(m.Body) != body {
		t.Fatalf("body %q, want %q", aws.ToString(m.Body), body)
	}
	for k, want := range attrs {
		g, ok := m.MessageAttributes[k]
		if !ok || aws.ToString(g.DataType) != aws.ToString(want.DataType) || aws.ToString(g.StringValue) != aws.ToString(want.StringValue) || !bytes.Equal(g.BinaryValue, want.BinaryValue) {
			t.Errorf("attribute %s = %+v, want %+v", k, g, want)
		}
	}
	if id := aws.ToString(m.MessageAttributes[consumer.AttrID].StringValue); id != "fixed-id" {
		t.Errorf("sqsonce-id %q", id)
	}
	if _, ok := m.MessageAttributes[deadletter.AttrFailure]; ok {
		t.Error("sqsonce-failure kept")
	}
	if len(m.MessageAttributes) != len(attrs)+2 {
		t.Errorf("attributes %v", slices.Sorted(maps.Keys(m.MessageAttributes)))
	}
}

func TestMoveAddsMissingID(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	// One with a failure record but no id, one with neither (as SQS's own
	// maxReceiveCount redrive leaves them), and one with ten attributes.
	ten := map[string]types.MessageAttributeValue{}
	for i := range 9 {
		ten[fmt.Sprintf("a%d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	// Ten attributes and neither sqsonce-id nor sqsonce-failure: one of
	// them makes room for sqsonce-id, chosen by the consumer's rule for
	// dead letters (consumer.DroppedAttributes: the name that sorts last).
	tenBare := map[string]types.MessageAttributeValue{}
	for i := range 10 {
		tenBare[fmt.Sprintf("b%d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	putDead(t, client, dlq, false,
		dead{body: "with-failure", class: "permanent", source: src, noID: true, id: "x1"},
		dead{body: "bare", noID: true, noFail: true},
		dead{body: "full", class: "permanent", source: src, noID: true, id: "x3", attrs: ten},
		dead{body: "ten-bare", noID: true, noFail: true, attrs: tenBare})
	r := newRedriver(t, client)
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Moved != 4 || sum.ByClass[redrive.ClassNone] != 2 {
		t.Fatalf("summary %+v", sum)
	}
	for _, m := range drain(t, client, src) {
		id := aws.ToString(m.MessageAttributes[consumer.AttrID].StringValue)
		switch aws.ToString(m.Body) {
		case "with-failure":
			if id != "orig-x1" {
				t.Errorf("with-failure: id %q, want the original message id", id)
			}
		case "bare":
			if id == "" {
				t.Error("bare: no id added")
			}
		case "full":
			if id != "orig-x3" || len(m.MessageAttributes) != 10 {
				t.Errorf("full: id %q, %d attributes (want 10: no history)", id, len(m.MessageAttributes))
			}
		case "ten-bare":
			_, b9 := m.MessageAttributes["b9"]
			if id == "" || len(m.MessageAttributes) != 10 || b9 {
				t.Errorf("ten-bare: id %q, attributes %v (want sqsonce-id and b0..b8)", id, slices.Sorted(maps.Keys(m.MessageAttributes)))
			}
		}
	}
}

// flaky wraps a client and fails some sends.
type flaky struct {
	redrive.SQSAPI
	calls   atomic.Int32
	failOn  int32 // the call that fails
	entries []int // entries of that call reported failed; none: the whole call errors
}

func (f *flaky) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	n := f.calls.Add(1)
	if n != f.failOn {
		return f.SQSAPI.SendMessageBatch(ctx, in, opts...)
	}
	if len(f.entries) == 0 {
		return nil, &smithy.GenericAPIError{Code: "InternalError", Message: "injected"}
	}
	// Send the others for real, report the chosen ones failed.
	var keep []types.SendMessageBatchRequestEntry
	var failed []types.BatchResultErrorEntry
	for i, e := range in.Entries {
		if slices.Contains(f.entries, i) {
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("injected"), SenderFault: true})
		} else {
			keep = append(keep, e)
		}
	}
	out, err := f.SQSAPI.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: keep}, opts...)
	if err != nil {
		return nil, err
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

func TestSendFailureLosesNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		entries []int
	}{{"entries", []int{1, 4, 9}}, {"call", nil}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			client := testenv.SQS(t)
			src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
			const n = 30
			putDead(t, client, dlq, false, seq("flaky", n, src)...)
			r := newRedriver(t, &flaky{SQSAPI: client, failOn: 2, entries: c.entries})
			sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
			moved := drain(t, client, src)
			left := drain(t, client, dlq)
			all := append(bodies(moved), bodies(left)...)
			slices.Sort(all)
			if want := bodyList(seq("flaky", n, src)); !slices.Equal(all, want) {
				t.Fatalf("after the move the queues hold %d messages %v, want each of %d exactly once", len(all), all, n)
			}
			if len(moved) != sum.Moved || len(left) != n-sum.Moved {
				t.Fatalf("summary %+v, moved %d, left %d", sum, len(moved), len(left))
			}
			if c.entries != nil {
				if err != nil || sum.Failed != len(c.entries) || sum.Moved != n-len(c.entries) {
					t.Fatalf("summary %+v, err %v", sum, err)
				}
			} else if err == nil || sum.Failed == 0 {
				t.Fatalf("a failed call must stop the move with an error: %+v", sum)
			}
		})
	}
}

func TestPeekMakesVisibleAgain(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	msgs := seq("peek", 15, src)
	msgs[3].class, msgs[3].err = consumer.ClassMaxAttempts, "slow"
	putDead(t, client, dlq, false, msgs...)
	r := newRedriver(t, client)
	q := resolve(t, r, dlq)
	got, err := r.Peek(context.Background(), q, redrive.PeekOptions{Max: 5})
	if err != nil || len(got) != 5 {
		t.Fatalf("peek: %d, %v", len(got), err)
	}
	for _, e := range got {
		if e.Failure == nil || e.Failure.SourceQueue != src || e.Age <= 0 {
			t.Fatalf("entry %+v", e)
		}
	}
	f, _ := redrive.ParseFilters("class=max_attempts")
	got, err = r.Peek(context.Background(), q, redrive.PeekOptions{Max: 5, Filters: f})
	if err != nil || len(got) != 1 || got[0].Failure.Error != "slow" {
		t.Fatalf("filtered peek: %v, %v", got, err)
	}
	if v, fl := testenv.Count(t, client, dlq); v != 15 || fl != 0 {
		t.Fatalf("after peek: %d visible, %d in flight", v, fl)
	}
}

func TestExportPurgeImport(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			client := testenv.SQS(t)
			src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: fifo})
			msgs := seq("exp", 12, src)
			for i := range msgs {
				msgs[i].group = fmt.Sprintf("g%d", i%3)
				msgs[i].attrs = map[string]types.MessageAttributeValue{"bin": {DataType: aws.String("Binary"), BinaryValue: []byte{byte(i), 0xff}}}
			}
			sent := putDead(t, client, dlq, fifo, msgs...)
			mirror, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-m", testenv.QueueOptions{FIFO: fifo})
			sendEntries(t, client, mirror, sent)
			before := drainKeep(t, client, mirror)
			r := newRedriver(t, client)
			q := resolve(t, r, dlq)
			path := filepath.Join(t.TempDir(), "dlq.jsonl")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			// With Delete: a FIFO DLQ can only be read to the end by deleting.
			sum, err := r.Export(context.Background(), q, f, redrive.ExportOptions{Delete: true})
			f.Close()
			if err != nil || sum.Moved != 12 {
				t.Fatalf("export: %+v, %v", sum, err)
			}
			if n := total(t, client, dlq); n != 0 {
				t.Fatalf("dlq has %d after export --delete", n)
			}
			if _, err := client.PurgeQueue(context.Background(), &sqs.PurgeQueueInput{QueueUrl: aws.String(dlq)}); err != nil {
				t.Fatal(err)
			}
			in, _ := os.Open(path)
			n, err := redrive.CheckRecords(in, fifo)
			if err != nil || n != 12 {
				t.Fatalf("check: %d, %v", n, err)
			}
			in.Seek(0, 0)
			sum, err = r.Import(context.Background(), in, q, redrive.ImportOptions{})
			in.Close()
			if err != nil || sum.Moved != 12 || sum.ByClass[consumer.ClassPermanent] != 12 {
				t.Fatalf("import: %+v, %v", sum, err)
			}
			after := drainKeep(t, client, dlq)
			if !slices.Equal(before, after) {
				t.Fatalf("round trip changed the messages:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// drainKeep reads every message of a queue (deleting it) and returns each
// as "group|body|attributes", sorted, with FIFO groups in order.
func drainKeep(t *testing.T, client *sqs.Client, url string) []string {
	t.Helper()
	msgs := drain(t, client, url)
	out := make([]string, 0, len(msgs))
	perGroup := map[string]int{}
	for _, m := range msgs {
		g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		keys := slices.Sorted(maps.Keys(m.MessageAttributes))
		var b strings.Builder
		for _, k := range keys {
			v := m.MessageAttributes[k]
			fmt.Fprintf(&b, "%s:%s:%q:%x;", k, aws.ToString(v.DataType), aws.ToString(v.StringValue), v.BinaryValue)
		}
		pos := 0 // a standard queue keeps no order: only FIFO positions count
		if g != "" {
			pos = perGroup[g]
			perGroup[g]++
		}
		out = append(out, fmt.Sprintf("%s#%d|%s|%s", g, pos, aws.ToString(m.Body), b.String()))
	}
	slices.Sort(out)
	// The per-group position makes FIFO order part of the comparison.
	return out
}

func TestExportWithoutDeleteLeavesDLQ(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, false, seq("keep", 8, src)...)
	r := newRedriver(t, client)
	var buf bytes.Buffer
	sum, err := r.Export(context.Background(), resolve(t, r, dlq), &buf, redrive.ExportOptions{})
	if err != nil || sum.Moved != 8 || strings.Count(buf.String(), "\n") != 8 {
		t.Fatalf("export: %+v, %v, %d lines", sum, err, strings.Count(buf.String(), "\n"))
	}
	if v, f := testenv.Count(t, client, dlq); v != 8 || f != 0 {
		t.Fatalf("dlq %d visible, %d in flight", v, f)
	}
	if _, err := r.Export(context.Background(), resolve(t, r, dlq), &buf, redrive.ExportOptions{Delete: true}); err == nil {
		t.Fatal("export --delete to a writer that cannot sync must fail")
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	r := newRedriver(t, client)
	ctx := context.Background()
	if _, err := r.Queue(ctx, "no-such-queue-"+testenv.Name("x")); !errors.Is(err, redrive.ErrUnknownQueue) {
		t.Fatalf("unknown queue: %v", err)
	}
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	fifo, _ := testenv.Queue(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true})
	putDead(t, client, dlq, false, seq("bad", 5, src)...)
	q := resolve(t, r, dlq)
	if _, err := r.Move(ctx, q, redrive.MoveOptions{To: fifo}); !errors.Is(err, redrive.ErrKindMismatch) {
		t.Fatalf("standard → FIFO: %v", err)
	}
	if _, err := r.Move(ctx, q, redrive.MoveOptions{To: dlq}); !errors.Is(err, redrive.ErrNoDestination) {
		t.Fatalf("into itself: %v", err)
	}
	if _, err := r.Move(ctx, q, redrive.MoveOptions{To: "missing-" + testenv.Name("x")}); !errors.Is(err, redrive.ErrUnknownQueue) {
		t.Fatalf("unknown destination: %v", err)
	}
	if _, err := redrive.CheckRecords(strings.NewReader("{\"body\":\"x\"}\nnot json\n"), false); !errors.Is(err, redrive.ErrBadRecord) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad record: %v", err)
	}
	if _, err := redrive.CheckRecords(strings.NewReader("{\"body\":\"x\"}\n"), true); !errors.Is(err, redrive.ErrKindMismatch) {
		t.Fatalf("standard records into FIFO: %v", err)
	}
	if v, f := testenv.Count(t, client, dlq); v != 5 || f != 0 || total(t, client, fifo) != 0 || total(t, client, src) != 0 {
		t.Fatalf("bad input moved something: dlq %d/%d", v, f)
	}
}

func TestDestinationDefaults(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	ctx := context.Background()
	key := []byte(strings.Repeat("k", 32))
	r, err := redrive.New(redrive.Config{Client: client, VisibilityTimeout: 10 * time.Second, SigningKey: key})
	if err != nil {
		t.Fatal(err)
	}
	// Two sources share one DLQ: messages go back to the source their
	// signed failure record names; one that records none, or whose record
	// is not signed, needs an explicit destination.
	dlq, dlqArn := testenv.Queue(t, client, testenv.Prefix(t)+"-dlq", testenv.QueueOptions{})
	a, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-a", testenv.QueueOptions{DLQArn: dlqArn})
	b, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-b", testenv.QueueOptions{DLQArn: dlqArn})
	putDead(t, client, dlq, false, dead{body: "to-a", class: "permanent", source: a, key: key}, dead{body: "to-b", class: "permanent", source: b, key: key})
	sum, err := r.Move(ctx, resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil || sum.Moved != 2 {
		t.Fatalf("%+v %v", sum, err)
	}
	if got := bodies(drain(t, client, a)); !slices.Equal(got, []string{"to-a"}) {
		t.Fatalf("a got %v", got)
	}
	if got := bodies(drain(t, client, b)); !slices.Equal(got, []string{"to-b"}) {
		t.Fatalf("b got %v", got)
	}
	putDead(t, client, dlq, false, dead{body: "nowhere", noFail: true}, dead{body: "unsigned", class: "permanent", source: a})
	if sum, err := r.Move(ctx, resolve(t, r, dlq), redrive.MoveOptions{}); err != nil || sum.Moved != 0 || sum.Refused != 2 {
		t.Fatalf("unattested: %+v %v", sum, err)
	}
	if v, f := testenv.Count(t, client, dlq); v != 2 || f != 0 {
		t.Fatalf("dlq %d/%d after the refused move", v, f)
	}
	// A DLQ that no queue names needs a destination.
	loner, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-loner", testenv.QueueOptions{})
	putDead(t, client, loner, false, dead{body: "orphan", class: "permanent", source: a})
	if _, err := r.Move(ctx, resolve(t, r, loner), redrive.MoveOptions{}); !errors.Is(err, redrive.ErrNoDestination) {
		t.Fatalf("no source queue: %v", err)
	}
	// With a single source, that source is the default.
	src, dlq2 := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq2, false, dead{body: "single", noFail: true})
	if sum, err := r.Move(ctx, resolve(t, r, dlq2), redrive.MoveOptions{}); err != nil || sum.Moved != 1 {
		t.Fatalf("%+v %v", sum, err)
	}
	if got := bodies(drain(t, client, src)); !slices.Equal(got, []string{"single"}) {
		t.Fatalf("single source got %v", got)
	}
}

// An interrupted move (Ctrl-C) returns with every message either moved or
// back in the DLQ, visible.
func TestMoveInterrupted(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, false, seq("int", 40, src)...)
	r := newRedriver(t, client)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, _ := redrive.ParseFilters("body~[02468]$") // half the messages are held back
	sum, err := r.Move(ctx, resolve(t, r, dlq), redrive.MoveOptions{Filters: f, Progress: func(p redrive.Progress) {
		if p.Phase == redrive.PhaseDeleted && p.Moved >= 5 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if v, fl := testenv.Count(t, client, dlq); fl != 0 || v != 40-sum.Moved {
		t.Fatalf("after the interrupt the dlq has %d visible, %d in flight; %d moved", v, fl, sum.Moved)
	}
	if n := total(t, client, src); n != sum.Moved {
		t.Fatalf("source has %d, summary says %d", n, sum.Moved)
	}
}

// failSync is a file whose Sync fails.
type failSync struct{ bytes.Buffer }

func (*failSync) Sync() error { return errors.New("disk on fire") }

// Export --delete deletes nothing it could not sync.
func TestExportDeletesOnlySynced(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	putDead(t, client, dlq, false, seq("sync", 6, src)...)
	r := newRedriver(t, client)
	sum, err := r.Export(context.Background(), resolve(t, r, dlq), &failSync{}, redrive.ExportOptions{Delete: true})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("err %v (%+v)", err, sum)
	}
	if v, f := testenv.Count(t, client, dlq); v != 6 || f != 0 {
		t.Fatalf("dlq %d visible, %d in flight: an unsynced export deleted messages", v, f)
	}
}

// A send failure in a FIFO group stops that group (its later messages
// stay, in order); other groups move.
func TestSendFailureFIFOKeepsOrder(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true})
	var msgs []dead
	for i := range 4 {
		for _, g := range []string{"a", "b"} {
			msgs = append(msgs, dead{body: fmt.Sprintf("%s-%d", g, i), group: g, class: "permanent", source: src})
		}
	}
	putDead(t, client, dlq, true, msgs...)
	// The first send carries a-0 and b-0 (one per group): fail b-0.
	r := newRedriver(t, &flaky{SQSAPI: client, failOn: 1, entries: []int{1}})
	sum, err := r.Move(context.Background(), resolve(t, r, dlq), redrive.MoveOptions{})
	if err != nil || sum.Failed != 1 || sum.Moved != 4 {
		t.Fatalf("%+v %v", sum, err)
	}
	if got := bodies(drain(t, client, src)); !slices.Equal(got, []string{"a-0", "a-1", "a-2", "a-3"}) {
		t.Fatalf("moved %v", got)
	}
	var left []string
	for _, m := range drain(t, client, dlq) {
		left = append(left, aws.ToString(m.Body))
	}
	if !slices.Equal(left, []string{"b-0", "b-1", "b-2", "b-3"}) {
		t.Fatalf("left %v", left)
	}
}
