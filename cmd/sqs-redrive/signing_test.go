package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// On a DLQ two queues share, move trusts only records signed with the
// key named by --signing-key-env (read from the environment, never the
// command line); without it they are refused and the error says what to
// pass. A variable that is unset or holds a short key is a usage error.
func TestSigningKeyEnv(t *testing.T) {
	const env = "SQS_REDRIVE_TEST_SIGNING_KEY"
	key := strings.Repeat("k", 40)
	t.Setenv(env, key)
	client := testenv.SQS(t)
	dlq, dlqArn := testenv.Queue(t, client, testenv.Prefix(t)+"-dlq", testenv.QueueOptions{})
	a, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-a", testenv.QueueOptions{DLQArn: dlqArn})
	b, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-b", testenv.QueueOptions{DLQArn: dlqArn})
	for i, src := range []string{a, b, b} {
		f := deadletter.Failure{Error: "boom", Class: "permanent", SourceQueue: src, Attempts: 1, OriginalMessageID: fmt.Sprint(i), FailedAt: time.Now().UTC()}
		body := fmt.Sprintf(`{"n":%d}`, i)
		f.Sign([]byte(key), body)
		rec, _ := json.Marshal(f)
		if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{deadletter.AttrFailure: {DataType: aws.String("String"), StringValue: aws.String(string(rec))}}}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := cli(t, "move", dlq, "--yes")
	if code != 1 || !strings.Contains(out, "refused 3") || !strings.Contains(out, "--signing-key-env") || !strings.Contains(errOut, "--to") {
		t.Fatalf("without the key: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct{ name, value, want string }{
		{"SQS_REDRIVE_TEST_UNSET_" + testenv.Name("x"), "", "is not set"},
		{env + "_SHORT", "short", "at least 32"},
	} {
		if c.value != "" {
			t.Setenv(c.name, c.value)
		}
		if code, _, errOut := cli(t, "move", dlq, "--yes", "--signing-key-env", c.name); code != 2 || !strings.Contains(errOut, c.want) || (c.value != "" && strings.Contains(errOut, c.value)) {
			t.Fatalf("--signing-key-env %s: exit %d: %s", c.name, code, errOut)
		}
	}
	code, out, errOut = cli(t, "move", dlq, "--yes", "--signing-key-env", env)
	if code != 0 || !strings.Contains(out, "moved 3") || strings.Contains(out+errOut, key) {
		t.Fatalf("with the key: exit %d\n%s%s", code, out, errOut)
	}
	if count(t, client, a) != 1 || count(t, client, b) != 2 || count(t, client, dlq) != 0 {
		t.Fatalf("a %d, b %d, dlq %d; want 1, 2, 0", count(t, client, a), count(t, client, b), count(t, client, dlq))
	}
}
