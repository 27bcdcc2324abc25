package redrive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// dead is one dead letter to put in a test DLQ.
type dead struct {
	body    string
	class   string
	err     string
	source  string // source_queue; "" leaves no failure attribute when class is ""
	group   string
	age     time.Duration
	attrs   map[string]types.MessageAttributeValue
	noID    bool
	id      string
	noFail  bool
	attempt int
	key     []byte // signs the failure record (nil: unsigned)
}

// putDead sends dead letters to a DLQ the way the consumer does, and
// returns the entries it sent.
func putDead(t testing.TB, client *sqs.Client, dlqURL string, fifo bool, msgs ...dead) (sent []types.SendMessageBatchRequestEntry) {
	t.Helper()
	for i := 0; i < len(msgs); i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j, d := range msgs[i:min(i+10, len(msgs))] {
			attrs := map[string]types.MessageAttributeValue{}
			for k, v := range d.attrs {
				attrs[k] = v
			}
			id := d.id
			if id == "" {
				id = fmt.Sprintf("id-%d-%s", i+j, testenv.Name("m"))
			}
			if !d.noID {
				attrs[consumer.AttrID] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(id)}
			}
			if !d.noFail {
				f := deadletter.Failure{Error: d.err, Class: d.class, SourceQueue: d.source, Attempts: max(1, d.attempt),
					OriginalMessageID: "orig-" + id, FailedAt: time.Now().Add(-d.age).UTC()}
				if d.key != nil {
					f.Sign(d.key, d.body)
				}
				b, _ := json.Marshal(f)
				attrs[deadletter.AttrFailure] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(b))}
			}
			e := types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(d.body), MessageAttributes: attrs}
			if fifo {
				g := d.group
				if g == "" {
					g = "g"
				}
				e.MessageGroupId = aws.String(g)
				e.MessageDeduplicationId = aws.String(testenv.Name("d"))
			}
			entries = append(entries, e)
		}
		sendEntries(t, client, dlqURL, entries)
		sent = append(sent, entries...)
	}
	return sent
}

// sendEntries sends entries (≤ 10 at a time), each FIFO one with a new
// deduplication id.
func sendEntries(t testing.TB, client *sqs.Client, url string, entries []types.SendMessageBatchRequestEntry) {
	t.Helper()
	for i := 0; i < len(entries); i += 10 {
		batch := slices.Clone(entries[i:min(i+10, len(entries))])
		for j := range batch {
			if batch[j].MessageDeduplicationId != nil {
				batch[j].MessageDeduplicationId = aws.String(testenv.Name("d"))
			}
		}
		out, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: batch})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("send: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
	}
}

// drain receives and deletes every message of a queue, in receive order,
// until the queue is empty (a receive whose response was lost hides its
// messages for a few seconds; drain waits for them).
func drain(t testing.TB, client *sqs.Client, queueURL string) []types.Message {
	t.Helper()
	var out []types.Message
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 5,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("drain receive: %v", err)
			}
			continue // a lost response: those messages come back in 5 s
		}
		if len(res.Messages) == 0 {
			if total(t, client, queueURL) == 0 || time.Now().After(deadline) {
				return out
			}
			continue
		}
		for _, m := range res.Messages {
			out = append(out, m)
			if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("drain delete: %v", err)
			}
		}
	}
}

// bodies returns the sorted bodies of messages.
func bodies(msgs []types.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = aws.ToString(m.Body)
	}
	sort.Strings(out)
	return out
}

// total returns visible + in-flight.
func total(t testing.TB, client *sqs.Client, url string) int {
	v, f := testenv.Count(t, client, url)
	return v + f
}

// newRedriver returns a Redriver with short timeouts for tests.
func newRedriver(t testing.TB, client redrive.SQSAPI) *redrive.Redriver {
	t.Helper()
	r, err := redrive.New(redrive.Config{Client: client, VisibilityTimeout: 10 * time.Second, EmptyReceives: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// resolve resolves a queue or fails.
func resolve(t testing.TB, r *redrive.Redriver, q string) redrive.Queue {
	t.Helper()
	out, err := r.Queue(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// seq makes n dead letters with bodies prefix-0.. for source.
func seq(prefix string, n int, source string) []dead {
	out := make([]dead, n)
	for i := range out {
		out[i] = dead{body: fmt.Sprintf("%s-%03d", prefix, i), class: consumer.ClassPermanent, err: "boom", source: source}
	}
	return out
}
