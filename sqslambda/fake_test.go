package sqslambda_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// fakeSQS is the shared in-process SQS (internal/sqsfake) holding the
// queues the tests use, plus what the tests read back: the visibility set
// per record and the heartbeat extensions, keyed "rh-"+record name.
//
// Tests build records with rec (synthetic names such as "m1") and turn
// them into an event with fakeSQS.event, which sends and receives them
// for real: each record keeps its name as MessageId but gets the receipt
// handle and system attributes SQS gave it.
type fakeSQS struct {
	*sqsfake.Fake

	mu         sync.Mutex
	names      map[string]string  // receipt handle → record name
	visibility map[string][]int32 // "rh-"+name → visibilities set (ChangeMessageVisibility)
	extended   map[string]int     // "rh-"+name → heartbeat extensions (ChangeMessageVisibilityBatch entries)
	sendErr    error              // when set, SendMessage fails with it
	urlErr     error              // when set, GetQueueUrl fails with it
	setup      bool               // event is sending and receiving: nothing injected or recorded
}

var _ sqslambda.SQSAPI = (*fakeSQS)(nil)

const (
	account = "123456789012"
	stdName = "orders"
	stdARN  = "arn:aws:sqs:us-east-1:" + account + ":orders"
	stdURL  = "https://sqs.us-east-1.amazonaws.com/" + account + "/orders"
	dlqName = "orders-dlq"
	dlqURL  = "https://sqs.us-east-1.amazonaws.com/" + account + "/orders-dlq"
	fifoARN = "arn:aws:sqs:us-east-1:" + account + ":jobs.fifo"
	fifoURL = "https://sqs.us-east-1.amazonaws.com/" + account + "/jobs.fifo"
	fdlqURL = "https://sqs.us-east-1.amazonaws.com/" + account + "/jobs-dlq.fifo"
)

// newFake returns a fake with a standard queue "orders" and a FIFO queue
// "jobs.fifo", each with a 600s visibility timeout and a RedrivePolicy
// (maxReceiveCount 5) to its DLQ.
func newFake() *fakeSQS {
	f := &fakeSQS{
		Fake:       sqsfake.New(),
		names:      map[string]string{},
		visibility: map[string][]int32{},
		extended:   map[string]int{},
	}
	f.AddQueue(dlqName, nil)
	f.AddQueue("jobs-dlq.fifo", nil)
	f.AddQueue(stdName, map[string]string{"VisibilityTimeout": "600", "RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:` + account + `:orders-dlq","maxReceiveCount":"5"}`})
	f.AddQueue("jobs.fifo", map[string]string{"VisibilityTimeout": "600", "RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:` + account + `:jobs-dlq.fifo","maxReceiveCount":"5"}`})
	f.Inject(f.hook)
	return f
}

// hook records visibility changes and extensions, and injects sendErr and
// urlErr.
func (f *fakeSQS) hook(op string, in any) sqsfake.Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setup {
		return sqsfake.Fault{}
	}
	switch op {
	case "SendMessage":
		if f.sendErr != nil {
			return sqsfake.Fault{Err: f.sendErr}
		}
	case "GetQueueUrl":
		if f.urlErr != nil {
			return sqsfake.Fault{Err: f.urlErr}
		}
	case "ChangeMessageVisibility":
		c := in.(*sqs.ChangeMessageVisibilityInput)
		k := "rh-" + f.nameOf(aws.ToString(c.ReceiptHandle))
		f.visibility[k] = append(f.visibility[k], c.VisibilityTimeout)
	case "ChangeMessageVisibilityBatch":
		for _, e := range in.(*sqs.ChangeMessageVisibilityBatchInput).Entries {
			f.extended["rh-"+f.nameOf(aws.ToString(e.ReceiptHandle))]++
		}
	}
	return sqsfake.Fault{}
}

// nameOf returns the record name of a receipt handle (the handle itself
// when unknown). Callers hold f.mu.
func (f *fakeSQS) nameOf(handle string) string {
	if n, ok := f.names[handle]; ok {
		return n
	}
	return handle
}

// event sends each record's body to its queue (by eventSourceARN; on FIFO
// with its MessageGroupId and its name as deduplication id), receives them
// all as an event source mapping would (several of a FIFO group at once),
// and returns the event: each record with its name as MessageId, the
// receipt handle and system attributes of the receive, and its own
// ApproximateReceiveCount when a test set one other than 1 (standing for
// earlier receives). It panics when the fake refuses: test set-up.
func (f *fakeSQS) event(recs ...events.SQSMessage) events.SQSEvent {
	ctx := context.Background()
	f.mu.Lock()
	f.setup = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.setup = false
		f.mu.Unlock()
	}()
	byID := map[string]int{} // SQS MessageId → index in recs
	urls := map[string]bool{}
	var order []string
	for i, r := range recs {
		a, err := settle.ParseARN(r.EventSourceARN)
		if err != nil {
			panic(err)
		}
		url := f.QueueURL(a.Name)
		in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(r.Body)}
		if g := r.Attributes["MessageGroupId"]; g != "" {
			in.MessageGroupId, in.MessageDeduplicationId = aws.String(g), aws.String(r.MessageId)
		}
		if h := r.Attributes["AWSTraceHeader"]; h != "" {
			in.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(h)}}
		}
		for name, v := range r.MessageAttributes {
			if in.MessageAttributes == nil {
				in.MessageAttributes = map[string]types.MessageAttributeValue{}
			}
			in.MessageAttributes[name] = types.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
		out, err := f.SendMessage(ctx, in)
		if err != nil {
			panic(fmt.Sprintf("fake: send %s: %v", r.MessageId, err))
		}
		byID[aws.ToString(out.MessageId)] = i
		if !urls[url] {
			urls[url] = true
			order = append(order, url)
		}
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(recs))}
	got := 0
	for _, url := range order {
		for {
			out, err := f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
				MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			})
			if err != nil {
				panic(fmt.Sprintf("fake: receive: %v", err))
			}
			if len(out.Messages) == 0 {
				break
			}
			for _, m := range out.Messages {
				i := byID[aws.ToString(m.MessageId)]
				r := recs[i]
				attrs := m.Attributes
				if n := r.Attributes["ApproximateReceiveCount"]; n != "" && n != "1" {
					attrs["ApproximateReceiveCount"] = n
				}
				r.ReceiptHandle, r.Attributes = aws.ToString(m.ReceiptHandle), attrs
				ev.Records[i] = r
				f.mu.Lock()
				f.names[r.ReceiptHandle] = r.MessageId
				f.mu.Unlock()
				got++
			}
		}
	}
	if got != len(recs) {
		panic(fmt.Sprintf("fake: received %d of %d records", got, len(recs)))
	}
	return ev
}

// sent returns the dead letters accepted by any queue of the fake other
// than the sources, as SendMessage inputs.
func (f *fakeSQS) sent() []*sqs.SendMessageInput {
	var out []*sqs.SendMessageInput
	for _, name := range []string{dlqName, "jobs-dlq.fifo", "elsewhere"} {
		url := f.QueueURL(name)
		for _, s := range f.Sent(url) {
			in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(s.Body), MessageAttributes: s.Attributes}
			if s.GroupID != "" {
				in.MessageGroupId, in.MessageDeduplicationId = aws.String(s.GroupID), aws.String(s.DeduplicationID)
			}
			out = append(out, in)
		}
	}
	return out
}

func (f *fakeSQS) visibilities() map[string][]int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]int32{}
	for k, v := range f.visibility {
		out[k] = append([]int32(nil), v...)
	}
	return out
}

func (f *fakeSQS) extensions(handle string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.extended[handle]
}

// rec builds an event record: id is the MessageId (and receipt handle
// "rh-"+id until fakeSQS.event gives it a real one), body tells the test
// handler what to do, group is the FIFO MessageGroupId ("" on a standard
// queue).
func rec(arn, id, body, group string) events.SQSMessage {
	attrs := map[string]string{
		"ApproximateReceiveCount":          "1",
		"SentTimestamp":                    "1700000000000",
		"SenderId":                         "AIDAEXAMPLE",
		"ApproximateFirstReceiveTimestamp": "1700000000100",
	}
	if group != "" {
		attrs["MessageGroupId"] = group
		attrs["MessageDeduplicationId"] = "dedup-" + id
		attrs["SequenceNumber"] = "1"
	}
	return events.SQSMessage{
		MessageId:      id,
		ReceiptHandle:  "rh-" + id,
		Body:           body,
		Attributes:     attrs,
		EventSourceARN: arn,
		EventSource:    "aws:sqs",
		AWSRegion:      "us-east-1",
	}
}

func failures(resp events.SQSEventResponse) string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return strings.Join(ids, ",")
}
