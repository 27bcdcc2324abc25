package settle_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

func TestDeadLetterQueue(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	prefix := testenv.Prefix(t)
	resolve := func(queueURL string) (string, bool, error) {
		out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(queueURL),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
		})
		if err != nil {
			t.Fatal(err)
		}
		return settle.DeadLetterQueue(context.Background(), client, "test", out.Attributes[string(types.QueueAttributeNameRedrivePolicy)])
	}
	for _, fifo := range []bool{false, true} {
		queueURL, dlqURL := testenv.QueueWithDLQ(t, client, fmt.Sprintf("%s-%v", prefix, fifo), testenv.QueueOptions{FIFO: fifo})
		got, gotFIFO, err := resolve(queueURL)
		if err != nil || got != dlqURL || gotFIFO != fifo {
			t.Errorf("fifo=%v: got %q %v %v, want %q", fifo, got, gotFIFO, err, dlqURL)
		}
	}
	plain, _ := testenv.Queue(t, client, prefix+"-plain", testenv.QueueOptions{})
	if got, _, err := resolve(plain); got != "" || err != nil {
		t.Errorf("no redrive policy: got %q, %v", got, err)
	}
}
