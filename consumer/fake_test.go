package consumer_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
)

// fakeSQS is an in-process SQS queue (plus its DLQ) for unit tests. Like
// real SQS, on a FIFO queue it returns several messages of one group in a
// receive, in order, and holds a group while any of its messages is in
// flight. Its clock is time.Now, so it works inside synctest bubbles.
type fakeSQS struct {
	queueURL, dlqURL string
	fifo             bool
	visibility       time.Duration

	mu       sync.Mutex
	msgs     []*fakeMsg
	byHandle map[string]*fakeMsg
	nextID   int
	dlq      []*sqs.SendMessageInput
	calls    map[string]int
	problems []string // contract violations seen (batch sizes, duplicate ids)
	visLog   []fakeVis
	notify   chan struct{}
	// failVisibility makes ChangeMessageVisibilityBatch refuse these handles.
	failVisibility map[string]bool
}

type fakeMsg struct {
	id, body, group, handle string
	attrs                   map[string]types.MessageAttributeValue
	visibleAt, receivedAt   time.Time
	receives                int
	deleted                 bool
}

type fakeVis struct {
	handle string
	secs   int32
	at     time.Time
}

var _ consumer.SQSAPI = (*fakeSQS)(nil)

func newFakeSQS(fifo bool, visibility time.Duration) *fakeSQS {
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	return &fakeSQS{
		queueURL:       "https://sqs.test/123456789012/q" + suffix,
		dlqURL:         "https://sqs.test/123456789012/dlq" + suffix,
		fifo:           fifo,
		visibility:     visibility,
		byHandle:       map[string]*fakeMsg{},
		calls:          map[string]int{},
		notify:         make(chan struct{}),
		failVisibility: map[string]bool{},
	}
}

func (f *fakeSQS) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

func (f *fakeSQS) wake() {
	close(f.notify)
	f.notify = make(chan struct{})
}

// send adds a message; group is ignored on standard queues.
func (f *fakeSQS) send(body, group string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	m := &fakeMsg{id: fmt.Sprintf("id-%d", f.nextID), body: body, group: group, visibleAt: time.Now()}
	f.msgs = append(f.msgs, m)
	f.wake()
	return m.id
}

// live returns the messages not deleted (in send order).
func (f *fakeSQS) live() []*fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fakeMsg
	for _, m := range f.msgs {
		if !m.deleted {
			c := *m
			out = append(out, &c)
		}
	}
	return out
}

func (f *fakeSQS) problem(format string, args ...any) {
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

func (f *fakeSQS) pick(max int) []types.Message {
	now := time.Now()
	busy := map[string]bool{}
	if f.fifo {
		for _, m := range f.msgs {
			if !m.deleted && m.visibleAt.After(now) {
				busy[m.group] = true
			}
		}
	}
	blocked := map[string]bool{} // FIFO: a group's later messages wait behind an earlier invisible one
	var out []types.Message
	for _, m := range f.msgs {
		if len(out) == max {
			break
		}
		if m.deleted {
			continue
		}
		if f.fifo && (busy[m.group] || blocked[m.group]) {
			continue
		}
		if m.visibleAt.After(now) {
			blocked[m.group] = true
			continue
		}
		m.receives++
		m.receivedAt = now
		m.handle = fmt.Sprintf("%s-r%d", m.id, m.receives)
		f.byHandle[m.handle] = m
		m.visibleAt = now.Add(f.visibility)
		attrs := map[string]string{
			"ApproximateReceiveCount": strconv.Itoa(m.receives),
			"SentTimestamp":           strconv.FormatInt(now.UnixMilli(), 10),
		}
		if f.fifo {
			attrs["MessageGroupId"] = m.group
		}
		out = append(out, types.Message{
			MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.handle), Body: aws.String(m.body),
			Attributes: attrs, MessageAttributes: m.attrs,
		})
	}
	if f.fifo {
		// Mark picked groups busy for the rest of this receive only through
		// visibility (already set above).
		_ = busy
	}
	return out
}

func (f *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	f.calls["ReceiveMessage"]++
	if in.MaxNumberOfMessages < 1 || in.MaxNumberOfMessages > 10 {
		f.problem("ReceiveMessage MaxNumberOfMessages=%d", in.MaxNumberOfMessages)
	}
	f.mu.Unlock()
	deadline := time.NewTimer(time.Duration(in.WaitTimeSeconds) * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		out := f.pick(int(in.MaxNumberOfMessages))
		notify := f.notify
		f.mu.Unlock()
		if len(out) > 0 {
			return &sqs.ReceiveMessageOutput{Messages: out}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return &sqs.ReceiveMessageOutput{}, nil
		case <-notify:
		case <-time.After(100 * time.Millisecond): // visibility timeouts expiring
		}
	}
}

func (f *fakeSQS) checkBatch(call string, ids []string) {
	if len(ids) == 0 || len(ids) > 10 {
		f.problem("%s with %d entries", call, len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			f.problem("%s: duplicate entry id %q", call, id)
		}
		seen[id] = true
	}
}

// current returns the message a handle names, if the handle is its latest.
func (f *fakeSQS) current(handle string) *fakeMsg {
	m := f.byHandle[handle]
	if m == nil || m.deleted || m.handle != handle {
		return nil
	}
	return m
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["DeleteMessageBatch"]++
	var ids []string
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		ids = append(ids, aws.ToString(e.Id))
		if m := f.current(aws.ToString(e.ReceiptHandle)); m != nil {
			m.deleted = true
		}
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	f.checkBatch("DeleteMessageBatch", ids)
	f.wake()
	return out, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["DeleteMessage"]++
	if m := f.current(aws.ToString(in.ReceiptHandle)); m != nil {
		m.deleted = true
	}
	f.wake()
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) changeVisibility(handle string, secs int32) *types.BatchResultErrorEntry {
	now := time.Now()
	f.visLog = append(f.visLog, fakeVis{handle, secs, now})
	m := f.current(handle)
	if m == nil || f.failVisibility[handle] {
		return &types.BatchResultErrorEntry{Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true, Message: aws.String("invalid handle")}
	}
	if !m.visibleAt.After(now) {
		return &types.BatchResultErrorEntry{Code: aws.String("AWS.SimpleQueueService.MessageNotInflight"), SenderFault: true, Message: aws.String("not in flight")}
	}
	if now.Add(time.Duration(secs) * time.Second).After(m.receivedAt.Add(12 * time.Hour)) {
		return &types.BatchResultErrorEntry{Code: aws.String("InvalidParameterValue"), SenderFault: true, Message: aws.String("over 12 hours")}
	}
	m.visibleAt = now.Add(time.Duration(secs) * time.Second)
	return nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ChangeMessageVisibilityBatch"]++
	var ids []string
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		ids = append(ids, aws.ToString(e.Id))
		if fe := f.changeVisibility(aws.ToString(e.ReceiptHandle), e.VisibilityTimeout); fe != nil {
			fe.Id = e.Id
			out.Failed = append(out.Failed, *fe)
		} else {
			out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		}
	}
	f.checkBatch("ChangeMessageVisibilityBatch", ids)
	f.wake()
	return out, nil
}

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ChangeMessageVisibility"]++
	if fe := f.changeVisibility(aws.ToString(in.ReceiptHandle), in.VisibilityTimeout); fe != nil {
		return nil, &types.ReceiptHandleIsInvalid{Message: fe.Message}
	}
	f.wake()
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["SendMessage"]++
	if aws.ToString(in.QueueUrl) != f.dlqURL {
		return nil, fmt.Errorf("fake: SendMessage to unknown queue %s", aws.ToString(in.QueueUrl))
	}
	f.dlq = append(f.dlq, in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("dlq-%d", len(f.dlq)))}, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetQueueAttributes"]++
	attrs := map[string]string{"FifoQueue": strconv.FormatBool(f.fifo)}
	switch aws.ToString(in.QueueUrl) {
	case f.queueURL:
		attrs["VisibilityTimeout"] = strconv.Itoa(int(f.visibility / time.Second))
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:%s","maxReceiveCount":"100"}`, f.dlqURL[strings.LastIndex(f.dlqURL, "/")+1:])
	case f.dlqURL:
	default:
		return nil, &types.QueueDoesNotExist{Message: aws.String("no such queue")}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetQueueUrl"]++
	for _, u := range []string{f.queueURL, f.dlqURL} {
		if strings.HasSuffix(u, "/"+aws.ToString(in.QueueName)) {
			return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(u)}, nil
		}
	}
	return nil, &types.QueueDoesNotExist{Message: aws.String("no such queue")}
}

type (
	sqsDeleteBatchInput  = sqs.DeleteMessageBatchInput
	sqsDeleteBatchOutput = sqs.DeleteMessageBatchOutput
	sqsOpt               = func(*sqs.Options)
)
