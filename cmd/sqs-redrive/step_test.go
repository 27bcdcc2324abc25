package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
	"github.com/sqsonce/sqsonce/step"
)

// A message parked on a step of unknown outcome is dead-lettered by the
// consumer with class outcome_unknown and the step's name: peek shows the
// step (escaped, as all outside text), and --json gives it as "step".
func TestPeekShowsStep(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	mw, err := dedupe.New(dedupe.Config{Store: dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "peek"})})
	if err != nil {
		t.Fatal(err)
	}
	h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		_, err := step.Run(ctx, "charge:card", step.Options{Policy: step.Park}, func(context.Context) ([]byte, error) {
			return nil, fmt.Errorf("POST /charges: %w", io.ErrUnexpectedEOF)
		})
		return err
	})
	p := consumertest.New(consumer.Config{Handler: h, Middleware: []consumer.Middleware{mw.Wrap}, QueueURL: src, DeadLetterQueueURL: dlq})
	res := p.Process(context.Background(), consumertest.NewMessage(`{"order":42}`, consumertest.WithAttribute(consumer.AttrID, "order-42")))
	if res.Outcome != consumer.OutcomeDeadLetter || res.Failure == nil || res.Failure.Class != consumer.ClassOutcomeUnknown || res.Failure.Step != "charge:card" {
		t.Fatalf("outcome %s, failure %+v; want a dead letter of class outcome_unknown naming the step", res.Outcome, res.Failure)
	}
	if _, err := client.SendMessage(context.Background(), res.DeadLetter); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "peek", dlq, "--class", consumer.ClassOutcomeUnknown)
	if code != 0 || !strings.Contains(out, "\nstep:      charge:card\n") || !strings.Contains(out, "class:     outcome_unknown\n") {
		t.Fatalf("peek: exit %d, want lines \"class:     outcome_unknown\" and \"step:      charge:card\":\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "peek", dlq, "--json")
	var o map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o["step"] != "charge:card" || o["class"] != consumer.ClassOutcomeUnknown {
		t.Fatalf("peek --json: exit %d, want step charge:card:\n%s%s", code, out, errOut)
	}
}

// A step name is outside text too (a producer can forge the record, and a
// FailureStep method can return anything): it is printed escaped.
func TestPeekStepEscaped(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	m := &consumer.Message{ID: "m-1"}
	printEntry(&out, 1, 1, redrive.Entry{Message: m, Failure: &deadletter.Failure{Class: consumer.ClassOutcomeUnknown, Step: "charge\x1b[2J\r"}}, false)
	if want := "\nstep:      charge\\x1b[2J\\r\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, out.String())
	}
}
