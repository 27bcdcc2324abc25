package producer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/producer"
)

// TestSendsKeepTheirConnection: batches sent one after another, on
// connections whose request writer runs late, all go over one connection.
// Unguarded against the SDK's request-body race (internal/sdkhttp), each
// send closed its connection, and a response lost that way makes the SDK
// send the batch again.
func TestSendsKeepTheirConnection(t *testing.T) {
	t.Parallel()
	url, _ := testenv.Queue(t, testenv.SQS(t), testenv.Prefix(t), testenv.QueueOptions{})
	var dials atomic.Int64
	late := sqs.NewFromConfig(testenv.Config(t), func(o *sqs.Options) { o.HTTPClient = testenv.LateHTTPClient(&dials) })
	p, err := producer.New(producer.Config{Client: late, QueueURL: url})
	if err != nil {
		t.Fatal(err)
	}
	const batches = 10
	for i := range batches {
		if _, err := p.Send(context.Background(), producer.Message{ID: fmt.Sprintf("job-%d", i), Body: "{}"}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if d := dials.Load(); d != 1 {
		t.Errorf("%d connections for %d sends one after another, want 1", d, batches)
	}
}
