package redrive_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// noSources is a server without ListDeadLetterSourceQueues.
type noSources struct{ redrive.SQSAPI }

func (noSources) ListDeadLetterSourceQueues(context.Context, *sqs.ListDeadLetterSourceQueuesInput, ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "UnsupportedOperation", Message: "not here"}
}

func TestList(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	dlq, dlqArn := testenv.Queue(t, client, testenv.Prefix(t)+"-dlq", testenv.QueueOptions{})
	a, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-a", testenv.QueueOptions{DLQArn: dlqArn})
	b, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-b", testenv.QueueOptions{DLQArn: dlqArn})
	msgs := seq("list", 4, a)
	msgs[2].age = 3 * time.Hour
	putDead(t, client, dlq, false, msgs...)
	// fauxqs answers ListDeadLetterSourceQueues with InvalidAction, so both
	// of these read RedrivePolicy; local-aws-sqs implements the call.
	for name, c := range map[string]redrive.SQSAPI{"invalid-action": client, "unsupported": noSources{client}} {
		r := newRedriver(t, c)
		var calls int
		dlqs, err := r.List(context.Background(), func(redrive.ListProgress) { calls++ })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var found *redrive.DLQ
		for i := range dlqs {
			if dlqs[i].URL == dlq {
				found = &dlqs[i]
			}
			if dlqs[i].URL == a || dlqs[i].URL == b {
				t.Fatalf("%s: a source queue listed as a DLQ", name)
			}
		}
		if found == nil {
			t.Fatalf("%s: dlq not listed among %d", name, len(dlqs))
		}
		var srcs []string
		for _, s := range found.Sources {
			srcs = append(srcs, s.URL)
		}
		slices.Sort(srcs)
		want := []string{a, b}
		slices.Sort(want)
		if !slices.Equal(srcs, want) || found.Messages+found.InFlight != 4 || found.OldestAge < 3*time.Hour || calls == 0 {
			t.Fatalf("%s: %+v (sources %v)", name, found, srcs)
		}
		got, err := r.Sources(context.Background(), found.Queue)
		if err != nil || len(got) != 2 {
			t.Fatalf("%s: sources %v, %v", name, got, err)
		}
	}
	if v, f := testenv.Count(t, client, dlq); v != 4 || f != 0 {
		t.Fatalf("list left %d visible, %d in flight", v, f)
	}
}

func TestListNativeSources(t *testing.T) {
	t.Parallel()
	client := testenv.MoveTaskSQS(t)
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	r := newRedriver(t, client)
	got, err := r.Sources(context.Background(), resolve(t, r, dlq))
	if err != nil || len(got) != 1 || got[0].URL != src {
		t.Fatalf("sources %+v, %v", got, err)
	}
	dlqs, err := r.List(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dlqs {
		if d.URL == dlq && len(d.Sources) == 1 && d.Sources[0].URL == src {
			return
		}
	}
	t.Fatalf("dlq not listed with its source: %+v", dlqs)
}
