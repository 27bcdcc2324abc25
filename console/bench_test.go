package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/console"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// BenchmarkDLQPage measures a DLQ page of 1,000 dead letters on the local
// stack, read afresh each time (the peek of every message, made visible
// again, grouped and rendered): ms/page is the figure the console's "a
// page of 1,000 dead letters in under a second" is about.
//
//	go test -run '^$' -bench BenchmarkDLQPage -benchtime 5x ./console/
func BenchmarkDLQPage(b *testing.B) {
	const n = 1000
	client := testenv.SQS(b)
	ctx := context.Background()
	base := testenv.Name("bench")
	create := func(name string, attrs map[string]string) string {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		return aws.ToString(out.QueueUrl)
	}
	dlq := create(base+"-dlq", nil)
	arn, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		b.Fatal(err)
	}
	src := create(base, map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"5"}`, arn.Attributes["QueueArn"])})
	// Dead letters as a consumer writes them: five reasons, two classes.
	for i := 0; i < n; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < i+10; j++ {
			f, _ := json.Marshal(deadletter.Failure{Error: fmt.Sprintf("reason %d: amount is negative", j%5), Class: []string{"permanent", "validation"}[j%2],
				SourceQueue: src, Attempts: 1 + j%3, OriginalMessageID: fmt.Sprintf("orig-%d", j), FailedAt: time.Now().Add(-time.Duration(j) * time.Second)})
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j - i)),
				MessageBody: aws.String(fmt.Sprintf(`{"credit":%d,"account":"acct-%d","amount":-%d}`, j, j%50, j)),
				MessageAttributes: map[string]types.MessageAttributeValue{
					deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(f))},
					deadletter.AttrID:      {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprintf("credit-%d", j))},
				}})
		}
		out, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(dlq), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			b.Fatalf("send: %v %v", err, out)
		}
	}
	r, err := redrive.New(redrive.Config{Client: client, VisibilityTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	c, err := console.New(console.Config{Redriver: r, QueuePrefix: base})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	page := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/dlq/"+base+"-dlq?reread=1", nil)
		req.Header.Set("X-Console-Token", c.Token())
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("page: %d %s", w.Code, w.Body)
		}
		return w
	}
	if rows := strings.Count(page().Body.String(), `<tr class="message"`); rows != n {
		b.Fatalf("the page shows %d dead letters, want %d", rows, n)
	}
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		w := page()
		total += time.Since(start)
		if w.Body.Len() == 0 {
			b.Fatal("empty page")
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/page")
}
