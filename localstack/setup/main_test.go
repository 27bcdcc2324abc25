package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// The `sqs-redrive native` commands of docs/redrive.md work on the local stack after
// setup: it creates the demo queues on local-aws-sqs too, where the
// move-task calls are answered.
func TestNativeCommandsAfterSetup(t *testing.T) {
	mt := testenv.MoveTaskSQS(t) // fails when the stack is expected and missing
	testenv.SQS(t)
	testenv.Dynamo(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if !strings.Contains(out.String(), "ready for native move tasks") {
		t.Fatalf("setup said %q", out.String())
	}
	dlq, err := mt.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("sqsonce-demo-dlq")})
	if err != nil {
		t.Fatalf("the demo DLQ is not on the move-task endpoint: %v", err)
	}
	// One dead letter to move, so that the task has something to do.
	if _, err := mt.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: dlq.QueueUrl, MessageBody: aws.String(`{"setup":"test"}`)}); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "sqs-redrive")
	if b, err := exec.Command("go", "build", "-o", bin, "../../cmd/sqs-redrive").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	ep := os.Getenv("SQSONCE_MOVE_TASK_ENDPOINT")
	// The commands as docs/redrive.md shows them, with the endpoint it says to add.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"native", "start", "sqsonce-demo-dlq", "--to", "sqsonce-demo", "--wait"}, 0, "COMPLETED"},
		{[]string{"native", "status", "sqsonce-demo-dlq"}, 0, "COMPLETED"},
		{[]string{"native", "cancel", "sqsonce-demo-dlq"}, 1, "no running move task"},
	} {
		cmd := exec.Command(bin, append(c.args, "--endpoint-url", ep)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.want) || strings.Contains(stderr.String(), "unknown queue") {
			t.Errorf("%v: exit %d (want %d)\n%s%s", c.args, code, c.code, stdout.String(), stderr.String())
		}
	}
	// Leave the demo queue as it was.
	src, err := mt.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("sqsonce-demo")})
	if err != nil {
		t.Fatal(err)
	}
	got := testenv.Receive(t, mt, aws.ToString(src.QueueUrl), 1, true)
	if len(got) != 1 || aws.ToString(got[0].Body) != `{"setup":"test"}` {
		t.Fatalf("moved message: %v", fmt.Sprint(got))
	}
}
