// Package testenv connects integration tests to the local AWS stack.
//
// The endpoints come from the standard SDK variables (AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION and static credentials) that
// `localstack/stack.sh up` writes to .stack/env; the message-move-task
// tests also need SQSONCE_MOVE_TASK_ENDPOINT, the PostgreSQL tests
// DATABASE_URL. SNS is AWS_ENDPOINT_URL_SNS when set, else the SQS
// endpoint: fauxqs serves both on one port (see [SNSEndpoint]). The rule, for each variable an integration test needs:
//
//   - not set: the test fails when SQSONCE_INTEGRATION=1 (set by `make
//     test`), and otherwise skips with a message that says how to run it;
//   - set: the stack is expected, so a value that is not a URL, or a server
//     that does not accept a connection, fails the test.
//
// A test skips only when a variable it needs is not set, and never when
// SQSONCE_INTEGRATION=1.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Required reports whether the local stack is expected (SQSONCE_INTEGRATION=1).
func Required() bool { return os.Getenv("SQSONCE_INTEGRATION") == "1" }

// need checks that the variable names a reachable endpoint: unset, the
// test fails or skips as Required says; set, it must be reachable.
func need(t testing.TB, variable string) string {
	t.Helper()
	endpoint := os.Getenv(variable)
	if endpoint == "" {
		if Required() {
			t.Fatalf("SQSONCE_INTEGRATION=1 but %s is not set: start the stack with `make stack-up` and source .stack/env, or run `make test`", variable)
		}
		t.Skipf("integration test: %s is not set (run `make test`, which starts the local stack)", variable)
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("%s=%q is not a URL", variable, endpoint)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 3*time.Second)
	if err != nil {
		t.Fatalf("%s=%s is unreachable: %v (is the local stack running? `make stack-up`)", variable, endpoint, err)
	}
	conn.Close()
	return endpoint
}

// Config loads the SDK configuration the way users' code does: from the
// environment. The test fails (or skips, see Required) when the SQS and
// DynamoDB endpoints are not set or not reachable.
func Config(t testing.TB) aws.Config {
	t.Helper()
	need(t, "AWS_ENDPOINT_URL_SQS")
	need(t, "AWS_ENDPOINT_URL_DYNAMODB")
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	return cfg
}

// SQS returns a client for the stack's SQS endpoint.
func SQS(t testing.TB) *sqs.Client {
	t.Helper()
	return sqs.NewFromConfig(Config(t))
}

// Dynamo returns a client for the stack's DynamoDB endpoint.
func Dynamo(t testing.TB) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(Config(t), LocalDynamoOptions)
}

// LocalDynamoOptions turns off the CRC32 check of DynamoDB responses.
// DynamoDB Local sends no x-amz-crc32 header on error responses, so the SDK
// logs a checksum warning on every conditional-check failure; the check
// guards against corruption on real networks, not on loopback.
func LocalDynamoOptions(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }

// MoveTaskSQS returns a client for local-aws-sqs, the server that answers
// ListDeadLetterSourceQueues and the message-move-task calls.
func MoveTaskSQS(t testing.TB) *sqs.Client {
	t.Helper()
	// The SQS and DynamoDB variables first: without them (`make test-unit`
	// unsets them) the test skips, even when this variable is still set.
	cfg := Config(t)
	endpoint := need(t, "SQSONCE_MOVE_TASK_ENDPOINT")
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// Name returns a unique resource name with the given prefix, valid for
// queues and tables (letters, digits, '-' and '_', at most 80 characters).
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	if len(name) > 70 {
		name = name[len(name)-70:]
	}
	return name
}

// QueueOptions shapes a test queue.
type QueueOptions struct {
	FIFO bool
	// VisibilityTimeout in seconds; 0 leaves SQS's default (30).
	VisibilityTimeout int
	// DLQ, when set, is the ARN of the dead-letter queue, with MaxReceiveCount.
	DLQArn          string
	MaxReceiveCount int
	// Attributes are extra queue attributes.
	Attributes map[string]string
}

// Queue creates a uniquely named queue, deleted when the test ends, and
// returns its URL and ARN.
func Queue(t testing.TB, client *sqs.Client, prefix string, opts QueueOptions) (queueURL, arn string) {
	t.Helper()
	ctx := context.Background()
	name := Name(prefix)
	attrs := map[string]string{}
	for k, v := range opts.Attributes {
		attrs[k] = v
	}
	if opts.FIFO {
		name += ".fifo"
		attrs[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	if opts.VisibilityTimeout > 0 {
		attrs[string(sqstypes.QueueAttributeNameVisibilityTimeout)] = fmt.Sprint(opts.VisibilityTimeout)
	}
	if opts.DLQArn != "" {
		n := opts.MaxReceiveCount
		if n == 0 {
			n = 5
		}
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, opts.DLQArn, n)
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("queue %s arn: %v", name, err)
	}
	return *out.QueueUrl, a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
}

// QueueWithDLQ creates a queue and its dead-letter queue (of the same kind)
// wired by a RedrivePolicy, and returns both URLs.
func QueueWithDLQ(t testing.TB, client *sqs.Client, prefix string, opts QueueOptions) (queueURL, dlqURL string) {
	t.Helper()
	dlqURL, dlqArn := Queue(t, client, prefix+"-dlq", QueueOptions{FIFO: opts.FIFO})
	opts.DLQArn = dlqArn
	queueURL, _ = Queue(t, client, prefix, opts)
	return queueURL, dlqURL
}

// QueueAttributesAPI is the one SQS call [Count] makes; *sqs.Client
// implements it.
type QueueAttributesAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ QueueAttributesAPI = (*sqs.Client)(nil)

// Counts returns the approximate visible and in-flight counts of a queue.
// An attribute the answer lacks, or one that is not a non-negative integer,
// is an error, never 0: a "queue empty" check must not pass without
// checking.
func Counts(ctx context.Context, client QueueAttributesAPI, queueURL string) (visible, inFlight int, err error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("testenv: attributes of %s: %w", queueURL, err)
	}
	if visible, err = countAttribute(out.Attributes, sqstypes.QueueAttributeNameApproximateNumberOfMessages); err != nil {
		return 0, 0, fmt.Errorf("testenv: queue %s: %w", queueURL, err)
	}
	if inFlight, err = countAttribute(out.Attributes, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible); err != nil {
		return 0, 0, fmt.Errorf("testenv: queue %s: %w", queueURL, err)
	}
	return visible, inFlight, nil
}

// countAttribute reads one count attribute strictly.
func countAttribute(attrs map[string]string, name sqstypes.QueueAttributeName) (int, error) {
	s, ok := attrs[string(name)]
	if !ok {
		return 0, fmt.Errorf("attribute %s missing from the answer", name)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("attribute %s=%q is not a count", name, s)
	}
	return n, nil
}

// Count returns the approximate visible and in-flight counts of a queue, or
// fails the test when they cannot be read (see [Counts]). Call it from the
// test's goroutine.
func Count(t testing.TB, client QueueAttributesAPI, queueURL string) (visible, inFlight int) {
	t.Helper()
	visible, inFlight, err := Counts(context.Background(), client, queueURL)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return visible, inFlight
}

// Table creates a uniquely named on-demand table with a string hash key
// (and an optional string range key), deleted when the test ends.
func Table(t testing.TB, client *dynamodb.Client, prefix, hashKey, rangeKey string) string {
	t.Helper()
	ctx := context.Background()
	name := Name(prefix)
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String(hashKey), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String(hashKey), KeyType: ddbtypes.KeyTypeHash},
		},
	}
	if rangeKey != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{AttributeName: aws.String(rangeKey), AttributeType: ddbtypes.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, ddbtypes.KeySchemaElement{AttributeName: aws.String(rangeKey), KeyType: ddbtypes.KeyTypeRange})
	}
	if _, err := client.CreateTable(ctx, in); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// Prefix turns a test name into a short resource-name prefix.
func Prefix(t testing.TB) string {
	r := strings.NewReplacer("/", "-", " ", "-", "#", "-", ".", "-")
	p := strings.ToLower(r.Replace(t.Name()))
	if len(p) > 40 {
		p = p[:40]
	}
	return p
}

// Receive reads n distinct messages (every attribute included) from a
// queue, deleting them when del is set, or fails the test after a minute.
// It survives what fauxqs does now and then, losing a ReceiveMessage
// response: the read uses a 5 s visibility timeout, so the lost messages
// come back soon, and an error is just another try.
func Receive(t testing.TB, client *sqs.Client, queueURL string, n int, del bool) []sqstypes.Message {
	t.Helper()
	var got []sqstypes.Message
	seen := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	for len(got) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: int32(min(10, n-len(got))), WaitTimeSeconds: 1, VisibilityTimeout: 5,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		cancel()
		if err != nil {
			continue
		}
		for _, m := range out.Messages {
			if del {
				if _, err := client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Fatalf("delete from %s: %v", queueURL, err)
				}
			}
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			got = append(got, m)
		}
	}
	if len(got) != n {
		t.Fatalf("received %d messages from %s within a minute, want %d", len(got), queueURL, n)
	}
	return got
}
