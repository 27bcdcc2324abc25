package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/sqslambda/sqslambdatest"
)

// functionTimeout is the function timeout the tests give the example: the
// queue's visibility timeout is 6 × it, as template.yaml has it.
const functionTimeout = 10 * time.Second

// stack is the local stack set up for the example function: a queue and
// its dead-letter queue, a dedupe table, and the function's environment.
type stack struct {
	client *sqs.Client
	url    string
	dlq    string
	table  string
	env    map[string]string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{client: testenv.SQS(t)}
	db := testenv.Dynamo(t)
	s.url, s.dlq = testenv.QueueWithDLQ(t, s.client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: int(6 * functionTimeout / time.Second)})
	s.table = testenv.Name("lambda-example-dedupe")
	if err := dedupedynamo.CreateTable(context.Background(), db, s.table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(s.table)})
	})
	s.env = map[string]string{
		"QUEUE_URL":                   s.url,
		"DEDUPE_TABLE":                s.table,
		"DEDUPE_NAMESPACE":            "orders",
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "10",
		"LOG_LEVEL":                   "debug",
	}
	return s
}

// send sends an order body, with the producer's sqsonce-id when id is set,
// and returns its MessageId.
func (s *stack) send(t *testing.T, body, id string) string {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(s.url), MessageBody: aws.String(body)}
	if id != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(id)}}
	}
	out, err := s.client.SendMessage(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

// handledOrders counts the "order handled" log lines by order_id.
func handledOrders(t *testing.T, logs string) map[string]int {
	t.Helper()
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			continue // the emulator's own lines, in the emulator test
		}
		if line["msg"] == "order handled" {
			id, _ := line["order_id"].(string)
			out[id]++
		}
	}
	return out
}

// The example function, driven by the event source mapping's stand-in
// against the local stack, batch by batch as Lambda runs it:
//
//   - o-1 and o-2 are handled and deleted; o-1 sent twice (the same job,
//     the same sqsonce-id) is handled once;
//   - a malformed order is dead-lettered by sqsonce with its reason and
//     reported as a success, so the mapping deletes it;
//   - o-3, whose key another invocation holds, is reported as a batch item
//     failure and left on the queue; once that invocation gives the key
//     up, o-3 comes back and is handled, once.
func TestFunctionUnderMapping(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	h, logger, err := newFunction(ctx, func(k string) string { return s.env[k] }, &logs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logger.Sync() }()

	// Another invocation holds o-3's key (the same dedupe record the
	// function claims) under a lease that outlasts the test.
	db := testenv.Dynamo(t)
	other, err := dedupedynamo.New(dedupedynamo.Config{Client: db, Table: s.table, Namespace: s.env["DEDUPE_NAMESPACE"]})
	if err != nil {
		t.Fatal(err)
	}
	o3 := `{"order_id":"o-3","amount":5}`
	claim, err := other.Claim(ctx, "job-3", dedupe.Fingerprint(o3), 10*time.Minute)
	if err != nil || claim.Status != dedupe.Claimed {
		t.Fatalf("claim job-3 = %+v, %v", claim, err)
	}

	ids := map[string]string{} // MessageId → what it is
	ids[s.send(t, `{"order_id":"o-1","amount":3}`, "job-1")] = "o-1"
	ids[s.send(t, `{"order_id":"o-2","amount":4}`, "job-2")] = "o-2"
	ids[s.send(t, `{"amount":4}`, "")] = "malformed"
	ids[s.send(t, o3, "job-3")] = "o-3"
	ids[s.send(t, `{"order_id":"o-1","amount":3}`, "job-1")] = "o-1 again"

	esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{
		Client: s.client, QueueURL: s.url, HandleFunc: h.Handle,
		FunctionTimeout: functionTimeout,
		EmptyReceives:   5, // a retry of o-3 comes back after 1 s
	})
	if err != nil {
		t.Fatal(err)
	}

	// Poll until o-3 has been reported as a failure, then let the other
	// invocation give its key up (it failed; its claim is released).
	var results []sqslambdatest.Result
	for reported := false; !reported; {
		r, err := esm.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v (results so far %+v)", err, results)
		}
		results = append(results, r)
		reported = slices.ContainsFunc(r.Failed, func(id string) bool { return ids[id] == "o-3" })
	}
	if err := other.Release(ctx, "job-3", claim.Token); err != nil {
		t.Fatal(err)
	}
	rest, err := esm.Drain(ctx)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	results = append(results, rest...)

	deleted := map[string]int{}
	var o3Tries []string // o-3's ApproximateReceiveCount at each invocation
	for i, r := range results {
		if r.Err != nil {
			t.Errorf("invocation %d: the whole batch failed: %v", i, r.Err)
		}
		for _, id := range r.Failed {
			if ids[id] != "o-3" {
				t.Errorf("invocation %d: %s reported as a failure", i, ids[id])
			}
		}
		for _, id := range r.Deleted {
			deleted[ids[id]]++
		}
		for _, rec := range r.Event.Records {
			if ids[rec.MessageId] == "o-3" {
				o3Tries = append(o3Tries, rec.Attributes["ApproximateReceiveCount"])
			}
		}
	}
	for _, what := range []string{"o-1", "o-2", "malformed", "o-3", "o-1 again"} {
		if deleted[what] != 1 {
			t.Errorf("%s deleted %d times, want once (deleted: %v)", what, deleted[what], deleted)
		}
	}
	if len(o3Tries) != 2 || o3Tries[0] != "1" || o3Tries[1] != "2" {
		t.Errorf("o-3 was received with counts %v, want [1 2]: reported once, then handled", o3Tries)
	}
	if got, want := handledOrders(t, logs.String()), map[string]int{"o-1": 1, "o-2": 1, "o-3": 1}; !maps.Equal(got, want) {
		t.Errorf("orders handled %v, want %v", got, want)
	}

	dead := testenv.Receive(t, s.client, s.dlq, 1, true)
	f, ok := deadletter.ParseFailure(dead[0].MessageAttributes)
	if aws.ToString(dead[0].Body) != `{"amount":4}` || !ok || f.Class != "permanent" || !strings.Contains(f.Error, "order_id is missing") {
		t.Errorf("dead letter %q with failure %+v (%v), want the malformed order, permanent, with its reason", aws.ToString(dead[0].Body), f, ok)
	}
	if visible, inFlight := testenv.Count(t, s.client, s.url); visible != 0 || inFlight != 0 {
		t.Errorf("queue holds %d visible, %d in flight; want nothing left", visible, inFlight)
	}
}
