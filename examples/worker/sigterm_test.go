package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// The built binary drains and exits 0 on SIGTERM, as ECS stops a task.
func TestSIGTERMDrains(t *testing.T) {
	client := testenv.SQS(t)
	url, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stderr syncBuffer
	cmd := exec.Command(bin, "-log-level", "debug", "-shutdown-timeout", "5s")
	cmd.Env = append(os.Environ(), "QUEUE_URL="+url, "CONCURRENCY=2")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	out, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"order_id":"o-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.MessageId)
	deadline := time.Now().Add(60 * time.Second)
	for settled(t, stderr.String())[id] != "ack" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if settled(t, stderr.String())[id] != "ack" {
		t.Fatalf("message not acked; logs:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("worker exited with %v after SIGTERM; logs:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker still running 30s after SIGTERM")
	}
	if !strings.Contains(stderr.String(), `"msg":"worker drained"`) {
		t.Errorf("no drain line; logs:\n%s", stderr.String())
	}
}
