package settle

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/sqserr"
)

// ARN is a parsed SQS queue ARN: arn:PARTITION:sqs:REGION:ACCOUNT:NAME.
type ARN struct {
	Partition string
	Region    string
	Account   string
	Name      string
}

// ParseARN parses an SQS queue ARN, such as a Lambda record's
// eventSourceARN or a RedrivePolicy's deadLetterTargetArn.
func ParseARN(s string) (ARN, error) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return ARN{}, fmt.Errorf("%q is not an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME)", s)
	}
	return ARN{Partition: parts[1], Region: parts[3], Account: parts[4], Name: parts[5]}, nil
}

// FIFO reports whether the queue is a FIFO queue (its name ends in .fifo).
func (a ARN) FIFO() bool { return strings.HasSuffix(a.Name, ".fifo") }

// String returns the ARN.
func (a ARN) String() string {
	return "arn:" + a.Partition + ":sqs:" + a.Region + ":" + a.Account + ":" + a.Name
}

// URLGetter is the call [DeadLetterQueue] makes.
type URLGetter interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// DeadLetterQueue returns the URL of the dead-letter queue named by a
// queue's RedrivePolicy attribute (policy) and whether it is FIFO. It
// returns "" and no error when the policy names none. Its errors are
// prefixed with prefix (the runtime: "consumer") and say what to fix.
func DeadLetterQueue(ctx context.Context, client URLGetter, prefix, policy string) (dlqURL string, fifo bool, err error) {
	if policy == "" {
		return "", false, nil
	}
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(policy), &rp); err != nil {
		return "", false, fmt.Errorf("%s: parse redrive policy %q: %w", prefix, policy, err)
	}
	if rp.DeadLetterTargetArn == "" {
		return "", false, nil
	}
	a, err := ParseARN(rp.DeadLetterTargetArn)
	if err != nil {
		return "", false, fmt.Errorf("%s: redrive policy: %w", prefix, err)
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(a.Name)}
	if a.Account != "" {
		in.QueueOwnerAWSAccountId = aws.String(a.Account)
	}
	out, err := client.GetQueueUrl(ctx, in)
	if err != nil {
		if sqserr.QueueMissing(err) {
			return "", false, fmt.Errorf("%s: the dead-letter queue %s named in the redrive policy does not exist: create it or fix the policy: %w", prefix, a, err)
		}
		return "", false, fmt.Errorf("%s: resolve dead-letter queue %s: %w", prefix, a, err)
	}
	return aws.ToString(out.QueueUrl), a.FIFO(), nil
}

// MaxReceiveCount returns the maxReceiveCount of a queue's RedrivePolicy
// attribute (policy): how many receives SQS allows a message before it
// moves it to the dead-letter queue. It returns 0 when the policy names
// none or cannot be read (SQS writes it as a number or as a string).
func MaxReceiveCount(policy string) int {
	var rp struct {
		Max json.RawMessage `json:"maxReceiveCount"`
	}
	if policy == "" || json.Unmarshal([]byte(policy), &rp) != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.Trim(string(rp.Max), `"`))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
