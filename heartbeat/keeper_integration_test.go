package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/heartbeat"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// receiveOneFrom receives the one message of a queue with the queue's own
// visibility timeout, trying again for a while: the emulator now and then
// loses a response, whose message then comes back after the visibility.
func receiveOneFrom(t *testing.T, client *sqs.Client, queueURL string) types.Message {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
		cancel()
		if err == nil && len(out.Messages) == 1 {
			return out.Messages[0]
		}
	}
	t.Fatalf("no message received from %s within 30s", queueURL)
	return types.Message{}
}

// pollNone receives from a queue for d as a second consumer would, and
// fails the test if a message comes, or if fewer than three receives were
// answered (the emulator now and then loses a response).
func pollNone(t *testing.T, client *sqs.Client, queueURL string, d time.Duration, when string) {
	t.Helper()
	answered := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		cancel()
		if err != nil {
			continue
		}
		answered++
		for _, m := range out.Messages {
			t.Fatalf("a second receive got %q %s", aws.ToString(m.Body), when)
		}
	}
	if answered < 3 {
		t.Fatalf("only %d receives answered in %s %s: the check proves nothing", answered, d, when)
	}
}

// TestKeptOnTheStack: a message received with a 2 s visibility and kept by
// a Keeper for three times that is not received by a second consumer
// polling meanwhile; after Remove and delete it is gone.
func TestKeptOnTheStack(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.Queue(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 2})
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("long job")}); err != nil {
		t.Fatal(err)
	}
	k, err := heartbeat.New(heartbeat.Config{Client: client, QueueURL: queueURL, Visibility: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- k.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()

	m := receiveOneFrom(t, client, queueURL)
	handle := aws.ToString(m.ReceiptHandle)
	lost := k.Add(handle, time.Now())

	// A second consumer polls for three visibilities while the job runs.
	pollNone(t, client, queueURL, 6*time.Second, "while the Keeper held it")
	select {
	case err := <-lost:
		t.Fatalf("lost while kept: %v", err)
	default:
	}

	if !k.Remove(handle) {
		t.Fatal("Remove = false for a handle the Keeper held")
	}
	if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatalf("delete after Remove: %v", err)
	}
	// Gone: not back after its visibility, and counted nowhere.
	pollNone(t, client, queueURL, 4*time.Second, "after Remove and delete")
	if visible, inFlight := testenv.Count(t, client, queueURL); visible != 0 || inFlight != 0 {
		t.Errorf("queue has %d visible, %d in flight after the delete; want none", visible, inFlight)
	}
}
