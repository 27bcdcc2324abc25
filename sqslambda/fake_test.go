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

	"github.com/sqsonce/sqsonce/sqslambda"
)

// fakeSQS is an in-process sqslambda.SQSAPI that records every call.
type fakeSQS struct {
	mu         sync.Mutex
	urls       map[string]string // queue name → URL
	attrs      map[string]map[string]string
	sends      []*sqs.SendMessageInput
	visibility map[string][]int32 // receipt handle → visibilities set
	extended   map[string]int     // receipt handle → heartbeat extensions
	urlCalls   int
	attrCalls  int
	sendErr    error
	urlErr     error
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

func newFake() *fakeSQS {
	return &fakeSQS{
		urls: map[string]string{
			stdName:         stdURL,
			dlqName:         dlqURL,
			"jobs.fifo":     fifoURL,
			"jobs-dlq.fifo": fdlqURL,
		},
		attrs: map[string]map[string]string{
			stdURL:  {"VisibilityTimeout": "600", "RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:` + account + `:orders-dlq","maxReceiveCount":"5"}`},
			fifoURL: {"VisibilityTimeout": "600", "RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:` + account + `:jobs-dlq.fifo","maxReceiveCount":"5"}`},
		},
		visibility: map[string][]int32{},
		extended:   map[string]int{},
	}
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	f.sends = append(f.sends, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("dl-%d", len(f.sends)))}, nil
}

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := aws.ToString(in.ReceiptHandle)
	f.visibility[h] = append(f.visibility[h], in.VisibilityTimeout)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		f.extended[aws.ToString(e.ReceiptHandle)]++
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.urlCalls++
	if f.urlErr != nil {
		return nil, f.urlErr
	}
	if aws.ToString(in.QueueOwnerAWSAccountId) != account {
		return nil, fmt.Errorf("fake: wrong account %q", aws.ToString(in.QueueOwnerAWSAccountId))
	}
	u, ok := f.urls[aws.ToString(in.QueueName)]
	if !ok {
		return nil, &types.QueueDoesNotExist{Message: aws.String("no such queue")}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(u)}, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attrCalls++
	a, ok := f.attrs[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, &types.QueueDoesNotExist{Message: aws.String("no such queue")}
	}
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

func (f *fakeSQS) sent() []*sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*sqs.SendMessageInput(nil), f.sends...)
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
// "rh-"+id), body tells the test handler what to do, group is the FIFO
// MessageGroupId ("" on a standard queue).
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
