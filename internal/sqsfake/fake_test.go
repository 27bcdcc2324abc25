package sqsfake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client holds every SQS method the fake implements, as the packages'
// interfaces declare them.
type client interface {
	CreateQueue(context.Context, *sqs.CreateQueueInput, ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(context.Context, *sqs.SetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	ListQueues(context.Context, *sqs.ListQueuesInput, ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	DeleteQueue(context.Context, *sqs.DeleteQueueInput, ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
	PurgeQueue(context.Context, *sqs.PurgeQueueInput, ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error)
	ListDeadLetterSourceQueues(context.Context, *sqs.ListDeadLetterSourceQueuesInput, ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	StartMessageMoveTask(context.Context, *sqs.StartMessageMoveTaskInput, ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(context.Context, *sqs.ListMessageMoveTasksInput, ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	CancelMessageMoveTask(context.Context, *sqs.CancelMessageMoveTaskInput, ...func(*sqs.Options)) (*sqs.CancelMessageMoveTaskOutput, error)
}

var (
	_ client = (*sqsfake.Fake)(nil)
	_ client = (*sqs.Client)(nil) // the fake's method set is the SDK's
)

var ctx = context.Background()

// code returns the SQS error code of err, or "" if it is not an API error.
func code(err error) string {
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		return ae.ErrorCode()
	}
	return ""
}

func receive(t *testing.T, f *sqsfake.Fake, url string, max int32, mod ...func(*sqs.ReceiveMessageInput)) []types.Message {
	t.Helper()
	in := &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: max,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}, MessageAttributeNames: []string{"All"}}
	for _, m := range mod {
		m(in)
	}
	out, err := f.ReceiveMessage(ctx, in)
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

func bodies(msgs []types.Message) string {
	var b []string
	for _, m := range msgs {
		b = append(b, aws.ToString(m.Body))
	}
	return strings.Join(b, ",")
}

func noProblems(t *testing.T, f *sqsfake.Fake) {
	t.Helper()
	if p := f.Problems(); len(p) > 0 {
		t.Errorf("Problems() = %q, want none", p)
	}
}

func TestQueueAdmin(t *testing.T) {
	t.Parallel()
	f := sqsfake.New(sqsfake.WithRegion("eu-west-1"), sqsfake.WithAccount("111122223333"))
	out, err := f.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders")})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	if want := "https://sqs.eu-west-1.amazonaws.com/111122223333/orders"; url != want {
		t.Fatalf("QueueUrl = %q, want %q", url, want)
	}
	attrs, err := f.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"QueueArn": "arn:aws:sqs:eu-west-1:111122223333:orders", "VisibilityTimeout": "30",
		"MaximumMessageSize": "1048576", "MessageRetentionPeriod": "345600", "DelaySeconds": "0",
		"ApproximateNumberOfMessages": "0",
	} {
		if got := attrs.Attributes[k]; got != want {
			t.Errorf("attribute %s = %q, want %q", k, got, want)
		}
	}
	if _, ok := attrs.Attributes["FifoQueue"]; ok {
		t.Error("standard queue reports FifoQueue")
	}
	// Same name, same attributes: the same URL; different: QueueNameExists.
	if out, err := f.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders")}); err != nil || aws.ToString(out.QueueUrl) != url {
		t.Errorf("second CreateQueue = %v, %v", out, err)
	}
	_, err = f.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders"), Attributes: map[string]string{"VisibilityTimeout": "5"}})
	if _, ok := errors.AsType[*types.QueueNameExists](err); !ok {
		t.Errorf("CreateQueue with other attributes: %v, want QueueNameExists", err)
	}
	if got, err := f.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")}); err != nil || aws.ToString(got.QueueUrl) != url {
		t.Errorf("GetQueueUrl = %v, %v", got, err)
	}
	_, err = f.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	if _, ok := errors.AsType[*types.QueueDoesNotExist](err); !ok {
		t.Errorf("GetQueueUrl(nope): %v, want QueueDoesNotExist", err)
	}
	if _, err := f.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"VisibilityTimeout": "7"}}); err != nil {
		t.Fatal(err)
	}
	attrs, _ = f.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"VisibilityTimeout"}})
	if len(attrs.Attributes) != 1 || attrs.Attributes["VisibilityTimeout"] != "7" {
		t.Errorf("after SetQueueAttributes: %v", attrs.Attributes)
	}
	if _, err := f.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	_, err = f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
	if _, ok := errors.AsType[*types.QueueDoesNotExist](err); !ok {
		t.Errorf("send to deleted queue: %v, want QueueDoesNotExist", err)
	}
}

func TestAttributeValidation(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	f.AddQueue("dlq", nil)
	f.AddQueue("dlq.fifo", nil)
	tests := []struct {
		name  string
		queue string
		attrs map[string]string
		want  string // error code, "" for success
	}{
		{"visibility too long", "q1", map[string]string{"VisibilityTimeout": "43201"}, "InvalidAttributeValue"},
		{"size too small", "q2", map[string]string{"MaximumMessageSize": "1023"}, "InvalidAttributeValue"},
		{"unknown attribute", "q3", map[string]string{"Colour": "red"}, "InvalidAttributeName"},
		{"fifo name without attribute", "q4.fifo", nil, "InvalidParameterValue"},
		{"fifo attribute without name", "q5", map[string]string{"FifoQueue": "true"}, "InvalidParameterValue"},
		{"content dedupe on standard", "q6", map[string]string{"ContentBasedDeduplication": "true"}, "InvalidAttributeName"},
		{"redrive to missing queue", "q7", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:nope","maxReceiveCount":3}`}, "InvalidAttributeValue"},
		{"redrive count 0", "q8", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":0}`}, "InvalidAttributeValue"},
		{"redrive to fifo from standard", "q9", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq.fifo","maxReceiveCount":3}`}, "InvalidAttributeValue"},
		{"redrive numeric count", "q10", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":3}`}, ""},
		{"redrive string count", "q11", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":"3"}`}, ""},
		{"bad name", "a b", nil, "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(tt.queue), Attributes: tt.attrs})
			if got := code(err); got != tt.want {
				t.Errorf("CreateQueue error %v (code %q), want code %q", err, got, tt.want)
			}
		})
	}
	fifo := f.AddQueue("x.fifo", nil)
	_, err := f.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &fifo, Attributes: map[string]string{"FifoQueue": "false"}})
	if code(err) != "InvalidAttributeName" {
		t.Errorf("changing FifoQueue: %v", err)
	}
}

func TestListQueuesAndSources(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	dlq := f.AddQueue("app-dlq", nil)
	policy := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:app-dlq","maxReceiveCount":"3"}`}
	a := f.AddQueue("app-a", policy)
	b := f.AddQueue("app-b", policy)
	f.AddQueue("other", nil)

	out, err := f.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("app-")})
	if err != nil || fmt.Sprint(out.QueueUrls) != fmt.Sprint([]string{dlq, a, b}) || out.NextToken != nil {
		t.Fatalf("ListQueues(app-) = %v, %v", out, err)
	}
	var pages [][]string
	var token *string
	for {
		out, err := f.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(3), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, out.QueueUrls)
		if token = out.NextToken; token == nil {
			break
		}
	}
	if len(pages) != 2 || len(pages[0]) != 3 || len(pages[1]) != 1 {
		t.Errorf("ListQueues pages = %v", pages)
	}
	src, err := f.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
	if err != nil || fmt.Sprint(src.QueueUrls) != fmt.Sprint([]string{a, b}) {
		t.Errorf("ListDeadLetterSourceQueues = %v, %v", src, err)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", nil)
		f.Put(q, "a", "")
		if _, err := f.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &q}); err != nil {
			t.Fatal(err)
		}
		if n := len(f.Messages(q)); n != 0 {
			t.Errorf("%d messages after purge", n)
		}
		_, err := f.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &q})
		if _, ok := errors.AsType[*types.PurgeQueueInProgress](err); !ok {
			t.Errorf("second purge within 60 s: %v, want PurgeQueueInProgress", err)
		}
		time.Sleep(60 * time.Second)
		if _, err := f.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &q}); err != nil {
			t.Errorf("purge after 60 s: %v", err)
		}
	})
}

func TestSendValidation(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	small := f.AddQueue("small", map[string]string{"MaximumMessageSize": "1024"})
	fifo := f.AddQueue("f.fifo", nil)
	str := func(s string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
	}
	eleven := map[string]types.MessageAttributeValue{}
	for i := range 11 {
		eleven[fmt.Sprintf("a%d", i)] = str("v")
	}
	tests := []struct {
		name string
		in   sqs.SendMessageInput
		want string
	}{
		{"ok", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String("hi")}, ""},
		{"empty body", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String("")}, "MissingParameter"},
		{"invalid character", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String("a\x00b")}, "InvalidMessageContents"},
		{"exactly the limit", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String(strings.Repeat("x", 1024))}, ""},
		{"body over the limit", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String(strings.Repeat("x", 1025))}, "InvalidParameterValue"},
		{"attributes count toward the limit", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String(strings.Repeat("x", 1020)),
			MessageAttributes: map[string]types.MessageAttributeValue{"k": str("v")}}, "InvalidParameterValue"},
		{"eleven attributes", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String("x"), MessageAttributes: eleven}, "InvalidParameterValue"},
		{"attribute without value", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String("x"),
			MessageAttributes: map[string]types.MessageAttributeValue{"k": {DataType: aws.String("String")}}}, "InvalidParameterValue"},
		{"reserved attribute name", sqs.SendMessageInput{QueueUrl: &small, MessageBody: aws.String("x"),
			MessageAttributes: map[string]types.MessageAttributeValue{"AWS.x": str("v")}}, "InvalidParameterValue"},
		{"fifo without group", sqs.SendMessageInput{QueueUrl: &fifo, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")}, "MissingParameter"},
		{"fifo without dedupe id", sqs.SendMessageInput{QueueUrl: &fifo, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")}, "InvalidParameterValue"},
		{"fifo with per-message delay", sqs.SendMessageInput{QueueUrl: &fifo, MessageBody: aws.String("x"), MessageGroupId: aws.String("g"),
			MessageDeduplicationId: aws.String("d"), DelaySeconds: 5}, "InvalidParameterValue"},
		{"fifo ok", sqs.SendMessageInput{QueueUrl: &fifo, MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.SendMessage(ctx, &tt.in)
			if got := code(err); got != tt.want {
				t.Fatalf("SendMessage error %v (code %q), want code %q", err, got, tt.want)
			}
			if err == nil && aws.ToString(out.MessageId) == "" {
				t.Error("no MessageId")
			}
		})
	}
}

func TestSendBatch(t *testing.T) {
	t.Parallel()
	entries := func(ids ...string) []types.SendMessageBatchRequestEntry {
		var es []types.SendMessageBatchRequestEntry
		for _, id := range ids {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String("body-" + id)})
		}
		return es
	}
	ids := func(n int) []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprint("e", i))
		}
		return s
	}
	big := entries("a", "b")
	big[0].MessageBody = aws.String(strings.Repeat("x", 600<<10))
	big[1].MessageBody = aws.String(strings.Repeat("x", 600<<10))
	tests := []struct {
		name    string
		entries []types.SendMessageBatchRequestEntry
		want    string
		problem bool
	}{
		{"empty", nil, "EmptyBatchRequest", true},
		{"eleven", entries(ids(11)...), "TooManyEntriesInBatchRequest", true},
		{"duplicate ids", entries("a", "a"), "BatchEntryIdsNotDistinct", true},
		{"invalid id", entries("a.b"), "InvalidBatchEntryId", true},
		{"over 1 MiB in total", big, "BatchRequestTooLong", false},
		{"ten", entries(ids(10)...), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			out, err := f.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: tt.entries})
			if got := code(err); got != tt.want {
				t.Fatalf("error %v (code %q), want code %q", err, got, tt.want)
			}
			if got := len(f.Problems()) > 0; got != tt.problem {
				t.Errorf("Problems() = %q, want a problem: %v", f.Problems(), tt.problem)
			}
			if err == nil && (len(out.Successful) != len(tt.entries) || len(f.Messages(q)) != len(tt.entries)) {
				t.Errorf("%d successful, %d queued, want %d", len(out.Successful), len(f.Messages(q)), len(tt.entries))
			}
			if err != nil && len(f.Messages(q)) != 0 {
				t.Error("a refused batch enqueued messages")
			}
		})
	}
	t.Run("per-entry failures", func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", map[string]string{"MaximumMessageSize": "1024"})
		es := entries("ok", "big", "injected")
		es[1].MessageBody = aws.String(strings.Repeat("x", 2000))
		f.Inject(func(op string, _ any) sqsfake.Fault {
			return sqsfake.Fault{FailEntries: map[string]string{"injected": "InternalError"}}
		})
		out, err := f.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: es})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Successful) != 1 || aws.ToString(out.Successful[0].Id) != "ok" {
			t.Errorf("Successful = %+v", out.Successful)
		}
		failed := map[string]string{}
		for _, e := range out.Failed {
			failed[aws.ToString(e.Id)] = aws.ToString(e.Code)
		}
		if failed["big"] != "InvalidParameterValue" || failed["injected"] != "InternalError" || len(failed) != 2 {
			t.Errorf("Failed = %v", failed)
		}
		if got := bodies(receive(t, f, q, 10)); got != "body-ok" {
			t.Errorf("queued %q, want only body-ok", got)
		}
	})
}

func TestFIFODedupeWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q.fifo", map[string]string{"ContentBasedDeduplication": "true"})
		send := func(body, dedupe string) *sqs.SendMessageOutput {
			t.Helper()
			in := &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(body), MessageGroupId: aws.String("g")}
			if dedupe != "" {
				in.MessageDeduplicationId = aws.String(dedupe)
			}
			out, err := f.SendMessage(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		first := send("a", "")
		dup := send("a", "")
		if aws.ToString(dup.MessageId) != aws.ToString(first.MessageId) {
			t.Errorf("duplicate got MessageId %s, want the original %s", aws.ToString(dup.MessageId), aws.ToString(first.MessageId))
		}
		explicit := send("b", "id-1")
		if again := send("other body", "id-1"); aws.ToString(again.MessageId) != aws.ToString(explicit.MessageId) {
			t.Error("explicit deduplication id not honoured")
		}
		if n := len(f.Messages(q)); n != 2 {
			t.Fatalf("%d messages queued, want 2", n)
		}
		time.Sleep(5*time.Minute - time.Second)
		send("a", "")
		if n := len(f.Messages(q)); n != 2 {
			t.Fatalf("inside the window: %d messages queued, want 2", n)
		}
		time.Sleep(time.Second)
		third := send("a", "")
		if n := len(f.Messages(q)); n != 3 || aws.ToString(third.MessageId) == aws.ToString(first.MessageId) {
			t.Fatalf("after the window: %d messages queued, want 3 and a new id", n)
		}
		if s1, s3 := aws.ToString(first.SequenceNumber), aws.ToString(third.SequenceNumber); s1 == "" || s3 <= s1 {
			t.Errorf("sequence numbers %q then %q, want increasing", s1, s3)
		}
		if len(f.Sent(q)) != 3 {
			t.Errorf("Sent() has %d entries, want 3 (duplicates not recorded)", len(f.Sent(q)))
		}
	})
}

func TestFIFOReceive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q.fifo", map[string]string{"VisibilityTimeout": "30"})
		for _, m := range []struct{ body, group string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"a3", "a"}, {"b2", "b"}} {
			f.Put(q, m.body, m.group)
		}
		got := receive(t, f, q, 3)
		if bodies(got) != "a1,a2,b1" {
			t.Fatalf("first receive = %s, want a1,a2,b1 (several per group, in order)", bodies(got))
		}
		if g := got[0].Attributes["MessageGroupId"]; g != "a" || got[0].Attributes["SequenceNumber"] == "" || got[0].Attributes["MessageDeduplicationId"] == "" {
			t.Errorf("FIFO attributes = %v", got[0].Attributes)
		}
		if more := receive(t, f, q, 10); len(more) != 0 {
			t.Fatalf("groups in flight, receive returned %s", bodies(more))
		}
		// Deleting a1 leaves a2 in flight: group a stays locked. Deleting
		// b1 frees group b.
		for _, m := range []types.Message{got[0], got[2]} {
			if _, err := f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		if more := receive(t, f, q, 10); bodies(more) != "b2" {
			t.Fatalf("after deleting a1 and b1: %s, want b2", bodies(more))
		}
		// a2's visibility ends: it comes back before a3, with count 2.
		time.Sleep(30 * time.Second)
		again := receive(t, f, q, 10)
		if bodies(again) != "a2,a3,b2" {
			t.Fatalf("after the timeout: %s, want a2,a3,b2", bodies(again))
		}
		if again[0].Attributes["ApproximateReceiveCount"] != "2" || aws.ToString(again[0].ReceiptHandle) == aws.ToString(got[1].ReceiptHandle) {
			t.Errorf("redelivery: count %s, handle reused: %v", again[0].Attributes["ApproximateReceiveCount"], aws.ToString(again[0].ReceiptHandle) == aws.ToString(got[1].ReceiptHandle))
		}
		// Releasing a2 while a3 is in flight: group a stays locked, as
		// AWS locks a group while any of its messages is in flight.
		if _, err := f.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: again[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		if more := receive(t, f, q, 10); len(more) != 0 {
			t.Fatalf("a2 released while a3 in flight: receive returned %s, want nothing", bodies(more))
		}
		noProblems(t, f)
	})
}

func TestStandardReceive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", map[string]string{"VisibilityTimeout": "10"})
		id := f.Put(q, "m", "")
		start := time.Now()
		first := receive(t, f, q, 1, func(in *sqs.ReceiveMessageInput) { in.VisibilityTimeout = 60 })
		if len(first) != 1 || aws.ToString(first[0].MessageId) != id {
			t.Fatalf("receive = %v", first)
		}
		a := first[0].Attributes
		if a["ApproximateReceiveCount"] != "1" || a["SentTimestamp"] != fmt.Sprint(start.UnixMilli()) || a["ApproximateFirstReceiveTimestamp"] != fmt.Sprint(start.UnixMilli()) {
			t.Errorf("attributes = %v", a)
		}
		if st := f.Messages(q)[0].State; st != sqsfake.InFlight {
			t.Errorf("state %s, want inflight", st)
		}
		time.Sleep(59 * time.Second) // the override (60 s), not the queue's 10 s
		if got := receive(t, f, q, 1); len(got) != 0 {
			t.Fatal("message visible before the overridden visibility timeout")
		}
		time.Sleep(time.Second)
		second := receive(t, f, q, 1)
		if len(second) != 1 || second[0].Attributes["ApproximateReceiveCount"] != "2" ||
			second[0].Attributes["ApproximateFirstReceiveTimestamp"] != fmt.Sprint(start.UnixMilli()) {
			t.Fatalf("second receive = %v", second)
		}
		if aws.ToString(second[0].ReceiptHandle) == aws.ToString(first[0].ReceiptHandle) {
			t.Error("receipt handle reused across receives")
		}
	})
}

func TestAttributeSelection(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	q := f.AddQueue("q", nil)
	_, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("b"), MessageAttributes: map[string]types.MessageAttributeValue{
		"sqsonce-id":      {DataType: aws.String("String"), StringValue: aws.String("1")},
		"sqsonce-failure": {DataType: aws.String("String"), StringValue: aws.String("2")},
		"trace":           {DataType: aws.String("String"), StringValue: aws.String("3")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, f, q, 1, func(in *sqs.ReceiveMessageInput) {
		in.MessageSystemAttributeNames = []types.MessageSystemAttributeName{"ApproximateReceiveCount"}
		in.MessageAttributeNames = []string{"sqsonce-.*"}
	})
	if len(got) != 1 {
		t.Fatal("no message")
	}
	if len(got[0].Attributes) != 1 || got[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Errorf("system attributes = %v, want only ApproximateReceiveCount", got[0].Attributes)
	}
	if len(got[0].MessageAttributes) != 2 || got[0].MessageAttributes["trace"].DataType != nil {
		t.Errorf("message attributes = %v, want the two sqsonce- ones", got[0].MessageAttributes)
	}
	f2 := sqsfake.New()
	q2 := f2.AddQueue("q", nil)
	f2.Put(q2, "b", "")
	plain, _ := f2.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q2})
	if len(plain.Messages) != 1 || plain.Messages[0].Attributes != nil || plain.Messages[0].MessageAttributes != nil {
		t.Errorf("unrequested attributes returned: %+v", plain.Messages)
	}
}

func TestReceiveParameters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   func(*sqs.ReceiveMessageInput)
	}{
		{"max 11", func(in *sqs.ReceiveMessageInput) { in.MaxNumberOfMessages = 11 }},
		{"max -1", func(in *sqs.ReceiveMessageInput) { in.MaxNumberOfMessages = -1 }},
		{"wait 21", func(in *sqs.ReceiveMessageInput) { in.WaitTimeSeconds = 21 }},
		{"visibility 43201", func(in *sqs.ReceiveMessageInput) { in.VisibilityTimeout = 43201 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			in := &sqs.ReceiveMessageInput{QueueUrl: &q}
			tt.in(in)
			_, err := f.ReceiveMessage(ctx, in)
			if code(err) != "InvalidParameterValue" || len(f.Problems()) != 1 {
				t.Errorf("error %v, problems %q; want InvalidParameterValue and one problem", err, f.Problems())
			}
		})
	}
}

func TestLongPoll(t *testing.T) {
	t.Parallel()
	poll := func(f *sqsfake.Fake, c context.Context, q string) (<-chan []types.Message, <-chan error) {
		msgs, errs := make(chan []types.Message, 1), make(chan error, 1)
		go func() {
			out, err := f.ReceiveMessage(c, &sqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 20, MaxNumberOfMessages: 10})
			errs <- err
			if out != nil {
				msgs <- out.Messages
			}
			close(msgs)
		}()
		return msgs, errs
	}
	t.Run("wakes on send", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			start := time.Now()
			msgs, errs := poll(f, ctx, q)
			time.Sleep(5 * time.Second)
			f.Put(q, "late", "")
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if got := <-msgs; bodies(got) != "late" || time.Since(start) != 5*time.Second {
				t.Errorf("got %q after %v, want late after 5s", bodies(got), time.Since(start))
			}
		})
	})
	t.Run("wakes when a delay or visibility ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", map[string]string{"DelaySeconds": "7"})
			f.Put(q, "delayed", "")
			if st := f.Messages(q)[0].State; st != sqsfake.Delayed {
				t.Errorf("state %s, want delayed", st)
			}
			start := time.Now()
			msgs, errs := poll(f, ctx, q)
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if got := <-msgs; bodies(got) != "delayed" || time.Since(start) != 7*time.Second {
				t.Errorf("got %q after %v, want delayed after 7s", bodies(got), time.Since(start))
			}
		})
	})
	t.Run("empty after the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			start := time.Now()
			msgs, errs := poll(f, ctx, q)
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if got := <-msgs; len(got) != 0 || time.Since(start) != 20*time.Second {
				t.Errorf("got %d messages after %v, want none after 20s", len(got), time.Since(start))
			}
		})
	})
	t.Run("returns on cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			c, cancel := context.WithCancel(ctx)
			start := time.Now()
			_, errs := poll(f, c, q)
			time.Sleep(3 * time.Second)
			cancel()
			if err := <-errs; !errors.Is(err, context.Canceled) || time.Since(start) != 3*time.Second {
				t.Errorf("error %v after %v, want context.Canceled after 3s", err, time.Since(start))
			}
		})
	})
	t.Run("queue default wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", map[string]string{"ReceiveMessageWaitTimeSeconds": "4"})
			start := time.Now()
			if got := receive(t, f, q, 1); len(got) != 0 || time.Since(start) != 4*time.Second {
				t.Errorf("returned after %v, want 4s (the queue's ReceiveMessageWaitTimeSeconds)", time.Since(start))
			}
		})
	})
}

func TestChangeVisibility(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup receives the message and returns the handle and seconds to use.
		setup func(t *testing.T, f *sqsfake.Fake, q string) (string, int32)
		want  string
	}{
		{"extend", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			return aws.ToString(receive(t, f, q, 1)[0].ReceiptHandle), 60
		}, ""},
		{"release", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			return aws.ToString(receive(t, f, q, 1)[0].ReceiptHandle), 0
		}, ""},
		{"garbage handle", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) { return "nope", 10 }, "ReceiptHandleIsInvalid"},
		{"handle of an earlier receive", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			old := aws.ToString(receive(t, f, q, 1)[0].ReceiptHandle)
			time.Sleep(30 * time.Second)
			receive(t, f, q, 1)
			return old, 10
		}, "ReceiptHandleIsInvalid"},
		{"deleted message", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			h := receive(t, f, q, 1)[0].ReceiptHandle
			f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: h})
			return aws.ToString(h), 10
		}, "ReceiptHandleIsInvalid"},
		{"visibility already over", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			h := aws.ToString(receive(t, f, q, 1)[0].ReceiptHandle)
			time.Sleep(30 * time.Second)
			return h, 10
		}, "MessageNotInflight"},
		{"over 43200", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			return aws.ToString(receive(t, f, q, 1)[0].ReceiptHandle), 43201
		}, "InvalidParameterValue"},
		{"12 hours after the receive exactly", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			h := aws.ToString(receive(t, f, q, 1)[0].ReceiptHandle)
			extendTo(t, f, q, h, 11*time.Hour)
			return h, 3600
		}, ""},
		{"beyond 12 hours after the receive", func(t *testing.T, f *sqsfake.Fake, q string) (string, int32) {
			h := aws.ToString(receive(t, f, q, 1)[0].ReceiptHandle)
			extendTo(t, f, q, h, 11*time.Hour)
			return h, 3601
		}, "InvalidParameterValue"},
	}
	for _, tt := range tests {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", tt.name, batch), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := sqsfake.New()
					q := f.AddQueue("q", nil)
					f.Put(q, "m", "")
					h, secs := tt.setup(t, f, q)
					before := len(f.VisibilityLog())
					var got string
					if batch {
						out, err := f.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &q,
							Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("e"), ReceiptHandle: &h, VisibilityTimeout: secs}}})
						if err != nil {
							t.Fatal(err)
						}
						if len(out.Failed) > 0 {
							got = aws.ToString(out.Failed[0].Code)
						} else if len(out.Successful) != 1 {
							t.Fatalf("neither Failed nor Successful: %+v", out)
						}
					} else {
						_, err := f.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: &h, VisibilityTimeout: secs})
						got = code(err)
					}
					if got != tt.want {
						t.Fatalf("code %q, want %q", got, tt.want)
					}
					log := f.VisibilityLog()
					if len(log) != before+1 || log[before].Handle != h || log[before].Seconds != secs || log[before].Err != tt.want || !log[before].At.Equal(time.Now()) {
						t.Errorf("VisibilityLog entry = %+v", log[before:])
					}
					if tt.want == "" {
						m := f.Messages(q)[0]
						if !m.VisibleAt.Equal(time.Now().Add(time.Duration(secs) * time.Second)) {
							t.Errorf("VisibleAt = %v, want now+%ds", m.VisibleAt, secs)
						}
					}
				})
			})
		}
	}
}

// extendTo keeps a message in flight by heartbeats until d after now.
func extendTo(t *testing.T, f *sqsfake.Fake, q, h string, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if _, err := f.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: &h, VisibilityTimeout: 120}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(min(time.Minute, time.Until(end)))
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", nil)
		f.Put(q, "m", "")
		old := receive(t, f, q, 1)[0].ReceiptHandle
		time.Sleep(30 * time.Second)
		cur := receive(t, f, q, 1)[0].ReceiptHandle
		// A handle from an earlier receive: success, message kept (as SQS documents).
		if _, err := f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: old}); err != nil {
			t.Fatalf("delete with stale handle: %v", err)
		}
		if len(f.Messages(q)) != 1 {
			t.Fatal("a stale handle deleted the message")
		}
		out, err := f.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q, Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("cur"), ReceiptHandle: cur},
			{Id: aws.String("bad"), ReceiptHandle: aws.String("garbage")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Successful) != 1 || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Code) != "ReceiptHandleIsInvalid" || !out.Failed[0].SenderFault {
			t.Errorf("batch = %+v", out)
		}
		if len(f.Messages(q)) != 0 {
			t.Fatal("the current handle did not delete")
		}
		// Deleting again succeeds.
		if _, err := f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: cur}); err != nil {
			t.Errorf("second delete: %v", err)
		}
		_, err = f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: aws.String("garbage")})
		if _, ok := errors.AsType[*types.ReceiptHandleIsInvalid](err); !ok {
			t.Errorf("garbage handle: %v, want *types.ReceiptHandleIsInvalid", err)
		}
		// Deleting after the visibility ended, before another receive, deletes.
		f.Put(q, "n", "")
		h := receive(t, f, q, 1)[0].ReceiptHandle
		time.Sleep(31 * time.Second)
		if _, err := f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: h}); err != nil || len(f.Messages(q)) != 0 {
			t.Errorf("delete after visibility: %v, %d left", err, len(f.Messages(q)))
		}
		noProblems(t, f)
	})
}

func TestRedrivePolicy(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprint("fifo=", fifo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := sqsfake.New()
				suffix := map[bool]string{true: ".fifo"}[fifo]
				dlq := f.AddQueue("dlq"+suffix, nil)
				q := f.AddQueue("src"+suffix, map[string]string{"VisibilityTimeout": "10",
					"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq` + suffix + `","maxReceiveCount":"2"}`})
				in := &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("poison"), MessageAttributes: map[string]types.MessageAttributeValue{
					"k": {DataType: aws.String("String"), StringValue: aws.String("v")}}}
				if fifo {
					in.MessageGroupId, in.MessageDeduplicationId = aws.String("g"), aws.String("d")
				}
				sent, err := f.SendMessage(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				f.Put(q, "next", "g")
				for i := range 2 {
					got := receive(t, f, q, 1)
					if bodies(got) != "poison" {
						t.Fatalf("receive %d = %q, want poison", i+1, bodies(got))
					}
					time.Sleep(10 * time.Second)
				}
				// Third receive: poison moves to the DLQ, next is returned.
				if got := receive(t, f, q, 1); bodies(got) != "next" {
					t.Fatalf("third receive = %q, want next", bodies(got))
				}
				moved := f.Messages(dlq)
				if len(moved) != 1 || moved[0].ID != aws.ToString(sent.MessageId) || moved[0].Body != "poison" ||
					aws.ToString(moved[0].Attributes["k"].StringValue) != "v" || moved[0].ReceiveCount != 0 || moved[0].State != sqsfake.Visible {
					t.Errorf("DLQ = %+v", moved)
				}
				if s := f.Sent(dlq); len(s) != 1 || s[0].MovedFrom != q {
					t.Errorf("Sent(dlq) = %+v", s)
				}
				if fifo && moved[0].GroupID != "g" {
					t.Errorf("moved FIFO message lost its group: %+v", moved[0])
				}
				// SQS stamps its own moves with the queue they came from.
				got := receive(t, f, dlq, 1)
				if want := "arn:aws:sqs:us-east-1:123456789012:src" + suffix; len(got) != 1 || got[0].Attributes["DeadLetterQueueSourceArn"] != want {
					t.Errorf("DLQ receive = %+v, want DeadLetterQueueSourceArn %s", got, want)
				}
			})
		})
	}
}

func TestReceiveRequestAttemptID(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q.fifo", map[string]string{"VisibilityTimeout": "30"})
		f.Put(q, "a1", "a")
		f.Put(q, "a2", "a")
		f.Inject(func(op string, _ any) sqsfake.Fault {
			return sqsfake.Fault{LoseResponse: op == "ReceiveMessage" && f.Calls("ReceiveMessage") == 1}
		})
		attempt := func(in *sqs.ReceiveMessageInput) { in.ReceiveRequestAttemptId = aws.String("try-1") }
		_, err := f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10, ReceiveRequestAttemptId: aws.String("try-1")})
		if !errors.Is(err, sqsfake.ErrResponseLost) {
			t.Fatalf("first receive: %v, want ErrResponseLost", err)
		}
		lost := f.Messages(q)
		if lost[0].State != sqsfake.InFlight {
			t.Fatal("the lost receive was not applied")
		}
		time.Sleep(20 * time.Second)
		retry := receive(t, f, q, 10, attempt)
		if len(retry) != 2 {
			t.Fatalf("retry returned %q, want a1,a2", bodies(retry))
		}
		if bodies(retry) != "a1,a2" || aws.ToString(retry[0].ReceiptHandle) != lost[0].ReceiptHandle || retry[0].Attributes["ApproximateReceiveCount"] != "1" {
			t.Fatalf("retry = %s, handle %s (want %s)", bodies(retry), aws.ToString(retry[0].ReceiptHandle), lost[0].ReceiptHandle)
		}
		// The retry reset the visibility timeout.
		if m := f.Messages(q)[0]; !m.VisibleAt.Equal(time.Now().Add(30 * time.Second)) {
			t.Errorf("VisibleAt = %v, want now+30s", m.VisibleAt)
		}
		// Once a message of the attempt changed, the id starts a new receive.
		f.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: retry[0].ReceiptHandle})
		if got := receive(t, f, q, 10, attempt); len(got) != 0 {
			t.Errorf("after a delete, the attempt id returned %s (group a is still locked by a2)", bodies(got))
		}
		// Past 5 minutes the id is forgotten.
		f.Put(q, "b1", "b")
		first := receive(t, f, q, 10, func(in *sqs.ReceiveMessageInput) { in.ReceiveRequestAttemptId = aws.String("try-2") })
		time.Sleep(5 * time.Minute)
		f.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: first[0].ReceiptHandle}) // already visible: no-op
		again := receive(t, f, q, 10, func(in *sqs.ReceiveMessageInput) { in.ReceiveRequestAttemptId = aws.String("try-2") })
		if len(again) == 0 || aws.ToString(again[0].ReceiptHandle) == aws.ToString(first[0].ReceiptHandle) {
			t.Errorf("after 5 minutes the attempt id returned the old handles")
		}
	})
}

func TestFaults(t *testing.T) {
	t.Parallel()
	t.Run("Err is not applied", func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", nil)
		throttled := &smithy.GenericAPIError{Code: "RequestThrottled", Fault: smithy.FaultServer}
		f.FailNext("SendMessage", 1, throttled)
		_, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("x")})
		if code(err) != "RequestThrottled" {
			t.Fatalf("error %v, want RequestThrottled", err)
		}
		if _, ok := errors.AsType[*smithy.OperationError](err); !ok {
			t.Error("error not wrapped in a smithy.OperationError as the SDK does")
		}
		if len(f.Messages(q)) != 0 {
			t.Error("a failed send was applied")
		}
		if _, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("x")}); err != nil {
			t.Errorf("second send: %v", err)
		}
		if f.Calls("SendMessage") != 2 {
			t.Errorf("Calls(SendMessage) = %d, want 2", f.Calls("SendMessage"))
		}
	})
	t.Run("LoseResponse is applied", func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", nil)
		f.Put(q, "x", "")
		h := receive(t, f, q, 1)[0].ReceiptHandle
		f.Inject(func(op string, in any) sqsfake.Fault {
			_, isBatch := in.(*sqs.DeleteMessageBatchInput)
			return sqsfake.Fault{LoseResponse: isBatch}
		})
		_, err := f.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q, Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("1"), ReceiptHandle: h}}})
		if !errors.Is(err, sqsfake.ErrResponseLost) {
			t.Fatalf("error %v, want ErrResponseLost", err)
		}
		if len(f.Messages(q)) != 0 {
			t.Error("the lost delete was not applied")
		}
	})
	t.Run("ResponseDelay cut short loses an applied receive", func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", nil)
		f.Put(q, "x", "")
		f.Inject(func(string, any) sqsfake.Fault { return sqsfake.Fault{ResponseDelay: time.Hour} })
		cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		_, err := f.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{QueueUrl: &q})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the caller's deadline", err)
		}
		if m := f.Messages(q); len(m) != 1 || m[0].State != sqsfake.InFlight {
			t.Errorf("messages %+v, want the one message in flight (the receive was applied)", m)
		}
	})
	t.Run("PollOutlivesCaller takes a message into a lost response", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			f.Inject(func(string, any) sqsfake.Fault { return sqsfake.Fault{PollOutlivesCaller: true} })
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := f.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 20})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want the caller's deadline", err)
			}
			f.Put(q, "x", "") // during the poll's 20 s, which go on
			synctest.Wait()
			if m := f.Messages(q); len(m) != 1 || m[0].State != sqsfake.InFlight {
				t.Errorf("messages %+v, want the one message in flight (taken by the abandoned poll)", m)
			}
			time.Sleep(20 * time.Second) // the poll is over: a later message stays visible
			f.Put(q, "y", "")
			synctest.Wait()
			for _, m := range f.Messages(q) {
				if m.Body == "y" && m.State != sqsfake.Visible {
					t.Errorf("message y is %s after the abandoned poll ended, want visible", m.State)
				}
			}
		})
	})
	t.Run("FailEntries", func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", nil)
		f.Put(q, "a", "")
		f.Put(q, "b", "")
		got := receive(t, f, q, 2)
		f.Inject(func(string, any) sqsfake.Fault {
			return sqsfake.Fault{FailEntries: map[string]string{"1": "InternalError"}}
		})
		out, err := f.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &q, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("0"), ReceiptHandle: got[0].ReceiptHandle, VisibilityTimeout: 100},
			{Id: aws.String("1"), ReceiptHandle: got[1].ReceiptHandle, VisibilityTimeout: 100},
		}})
		if err != nil || len(out.Successful) != 1 || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "1" || out.Failed[0].SenderFault {
			t.Fatalf("batch = %+v, %v", out, err)
		}
		if len(f.VisibilityLog()) != 1 {
			t.Errorf("an injected entry failure reached the queue: %+v", f.VisibilityLog())
		}
	})
	t.Run("Delay honours the context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			f.Inject(func(string, any) sqsfake.Fault { return sqsfake.Fault{Delay: time.Minute} })
			start := time.Now()
			if _, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("x")}); err != nil || time.Since(start) != time.Minute {
				t.Fatalf("delayed send: %v after %v", err, time.Since(start))
			}
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := f.SendMessage(c, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("y")})
			if !errors.Is(err, context.DeadlineExceeded) || len(f.Messages(q)) != 1 {
				t.Errorf("send cancelled during delay: %v, %d messages", err, len(f.Messages(q)))
			}
		})
	})
}

func TestApproximateCountsAndRetention(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", map[string]string{"MessageRetentionPeriod": "60"})
		f.Put(q, "a", "")
		f.Put(q, "b", "")
		f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("c"), DelaySeconds: 30})
		receive(t, f, q, 1)
		out, err := f.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &q, AttributeNames: []types.QueueAttributeName{
			"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"}})
		if err != nil {
			t.Fatal(err)
		}
		a := out.Attributes
		if a["ApproximateNumberOfMessages"] != "1" || a["ApproximateNumberOfMessagesNotVisible"] != "1" || a["ApproximateNumberOfMessagesDelayed"] != "1" {
			t.Errorf("counts = %v, want 1 each", a)
		}
		time.Sleep(60 * time.Second)
		if n := len(f.Messages(q)); n != 0 {
			t.Errorf("%d messages past the retention period", n)
		}
	})
}

func TestMessageMoveTask(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		dlq := f.AddQueue("dlq", nil)
		dlqARN := "arn:aws:sqs:us-east-1:123456789012:dlq"
		src := f.AddQueue("src", map[string]string{"VisibilityTimeout": "1",
			"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":"1"}`})
		other := f.AddQueue("other", nil)
		id := f.Put(src, "poison", "")
		receive(t, f, src, 1)
		time.Sleep(time.Second)
		receive(t, f, src, 1) // moves poison to the DLQ
		f.Put(dlq, "sent-directly", "")
		if n := len(f.Messages(dlq)); n != 2 {
			t.Fatalf("%d messages in the DLQ, want 2", n)
		}
		_, err := f.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:123456789012:src")})
		if code(err) != "InvalidParameterValue" {
			t.Errorf("move out of a queue that is no DLQ: %v", err)
		}
		if _, err := f.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqARN}); err != nil {
			t.Fatal(err)
		}
		back := f.Messages(src)
		if len(back) != 1 || back[0].ID != id || len(f.Messages(dlq)) != 1 {
			t.Fatalf("source %+v, DLQ %d messages: want poison back, sent-directly left", back, len(f.Messages(dlq)))
		}
		if _, err := f.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqARN,
			DestinationArn: aws.String("arn:aws:sqs:us-east-1:123456789012:other")}); err != nil {
			t.Fatal(err)
		}
		if got := f.Messages(other); len(got) != 1 || got[0].Body != "sent-directly" {
			t.Errorf("other = %+v", got)
		}
		tasks, err := f.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &dlqARN, MaxResults: aws.Int32(10)})
		if err != nil || len(tasks.Results) != 2 || aws.ToString(tasks.Results[0].Status) != "COMPLETED" ||
			aws.ToString(tasks.Results[0].DestinationArn) == "" || tasks.Results[1].ApproximateNumberOfMessagesMoved != 1 {
			t.Errorf("ListMessageMoveTasks = %+v, %v", tasks, err)
		}
		_, err = f.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: aws.String("x")})
		if _, ok := errors.AsType[*types.ResourceNotFoundException](err); !ok {
			t.Errorf("cancel of a finished task: %v", err)
		}
	})
}

func TestSettleBatchLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ids  []string
		want string
	}{
		{"empty", nil, "EmptyBatchRequest"},
		{"eleven", strings.Split("a,b,c,d,e,f,g,h,i,j,k", ","), "TooManyEntriesInBatchRequest"},
		{"duplicate", []string{"a", "a"}, "BatchEntryIdsNotDistinct"},
		{"invalid id", []string{""}, "InvalidBatchEntryId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := sqsfake.New()
			q := f.AddQueue("q", nil)
			f.Put(q, "m", "")
			h := receive(t, f, q, 1)[0].ReceiptHandle
			var del []types.DeleteMessageBatchRequestEntry
			var vis []types.ChangeMessageVisibilityBatchRequestEntry
			for _, id := range tt.ids {
				del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(id), ReceiptHandle: h})
				vis = append(vis, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(id), ReceiptHandle: h, VisibilityTimeout: 5})
			}
			_, err := f.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &q, Entries: vis})
			if code(err) != tt.want {
				t.Errorf("ChangeMessageVisibilityBatch: %v, want %s", err, tt.want)
			}
			_, err = f.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q, Entries: del})
			if code(err) != tt.want {
				t.Errorf("DeleteMessageBatch: %v, want %s", err, tt.want)
			}
			if len(f.Problems()) != 2 || len(f.Messages(q)) != 1 || len(f.VisibilityLog()) != 0 {
				t.Errorf("problems %q, %d messages, %d visibility changes: want 2 problems and nothing applied",
					f.Problems(), len(f.Messages(q)), len(f.VisibilityLog()))
			}
		})
	}
}
