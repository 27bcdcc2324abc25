package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// QueueAPI is the part of the SQS client [CreateQueue] uses. *sqs.Client
// satisfies it.
type QueueAPI interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
}

var _ QueueAPI = (*sqs.Client)(nil)

// QueueConfig describes a queue and its dead-letter queue for
// [CreateQueue]. Name is required.
type QueueConfig struct {
	// Name is the queue's name. A FIFO queue's name ends in ".fifo"; it is
	// added when missing.
	Name string
	// FIFO makes both queues FIFO queues. Defaults to whether Name ends in
	// ".fifo".
	FIFO bool
	// DeadLetterName is the DLQ's name. Defaults to Name + "-dlq" (before
	// ".fifo").
	DeadLetterName string
	// VisibilityTimeout is the queue's default visibility timeout. The
	// consumer's heartbeat extends it every third of it while a handler
	// runs, so it bounds how long a crashed worker's messages stay hidden;
	// for Lambda, AWS recommends 6 × the function timeout. Defaults to 60s.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many receives SQS allows before it moves a
	// message to the DLQ itself: the backstop behind the consumer's own
	// retries (Config.MaxAttempts). Defaults to 10.
	MaxReceiveCount int
	// Retention is how long the queue keeps a message. Defaults to 4 days
	// (SQS's default).
	Retention time.Duration
	// DeadLetterRetention is how long the DLQ keeps a message; it should be
	// longer than Retention, because SQS keeps a dead letter's original
	// enqueue time. Defaults to 14 days, the most SQS allows.
	DeadLetterRetention time.Duration
}

// Queues names what [CreateQueue] made.
type Queues struct {
	URL, ARN                     string
	DeadLetterURL, DeadLetterARN string
}

// CreateQueue creates a queue and its dead-letter queue, with the
// queue's RedrivePolicy pointing at the DLQ. It is idempotent: queues that
// exist are brought to the attributes asked for.
func CreateQueue(ctx context.Context, client QueueAPI, cfg QueueConfig) (Queues, error) {
	if cfg.Name == "" {
		return Queues{}, errors.New("producer: QueueConfig.Name is required")
	}
	if cfg.MaxReceiveCount < 0 || cfg.MaxReceiveCount > 1000 {
		return Queues{}, errors.New("producer: MaxReceiveCount must be between 1 and 1000")
	}
	fifo := cfg.FIFO || strings.HasSuffix(cfg.Name, ".fifo")
	base := strings.TrimSuffix(cfg.Name, ".fifo")
	name, dlqName := base, cmp.Or(strings.TrimSuffix(cfg.DeadLetterName, ".fifo"), base+"-dlq")
	if fifo {
		name, dlqName = name+".fifo", dlqName+".fifo"
	}
	visibility := cmp.Or(cfg.VisibilityTimeout, time.Minute)
	retention := cmp.Or(cfg.Retention, 4*24*time.Hour)
	dlqRetention := cmp.Or(cfg.DeadLetterRetention, sqslimits.MaxRetention)
	for _, d := range []time.Duration{visibility, retention, dlqRetention} {
		if d < 0 || d%time.Second != 0 {
			return Queues{}, fmt.Errorf("producer: %v is not a whole number of seconds", d)
		}
	}
	if visibility > sqslimits.MaxVisibility {
		return Queues{}, errors.New("producer: VisibilityTimeout must be at most 12h")
	}
	if retention < sqslimits.MinRetention || retention > sqslimits.MaxRetention || dlqRetention < sqslimits.MinRetention || dlqRetention > sqslimits.MaxRetention {
		return Queues{}, errors.New("producer: retention must be between 1 minute and 14 days")
	}

	var q Queues
	var err error
	dlqAttrs := map[string]string{
		string(types.QueueAttributeNameMessageRetentionPeriod): seconds(dlqRetention),
	}
	if fifo {
		dlqAttrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	if q.DeadLetterURL, q.DeadLetterARN, err = ensureQueue(ctx, client, dlqName, dlqAttrs); err != nil {
		return Queues{}, err
	}
	attrs := map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout):      seconds(visibility),
		string(types.QueueAttributeNameMessageRetentionPeriod): seconds(retention),
		string(types.QueueAttributeNameRedrivePolicy): fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`,
			q.DeadLetterARN, cmp.Or(cfg.MaxReceiveCount, 10)),
	}
	if fifo {
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	if q.URL, q.ARN, err = ensureQueue(ctx, client, name, attrs); err != nil {
		return Queues{}, err
	}
	return q, nil
}

func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// ensureQueue creates the queue or, when one of that name exists with other
// attributes, sets them; it returns the queue's URL and ARN.
func ensureQueue(ctx context.Context, client QueueAPI, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	switch {
	case err == nil:
		url = aws.ToString(out.QueueUrl)
	case queueExists(err):
		got, gerr := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if gerr != nil {
			return "", "", fmt.Errorf("producer: queue %s: %w", name, gerr)
		}
		url = aws.ToString(got.QueueUrl)
		settable := make(map[string]string, len(attrs))
		for k, v := range attrs {
			if k != string(types.QueueAttributeNameFifoQueue) { // fixed at creation
				settable[k] = v
			}
		}
		if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: settable}); err != nil {
			return "", "", fmt.Errorf("producer: set attributes of queue %s: %w", name, err)
		}
	default:
		return "", "", fmt.Errorf("producer: create queue %s: %w", name, err)
	}
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn, types.QueueAttributeNameFifoQueue},
	})
	if err != nil {
		return "", "", fmt.Errorf("producer: attributes of queue %s: %w", name, err)
	}
	if want, got := attrs[string(types.QueueAttributeNameFifoQueue)] == "true", a.Attributes[string(types.QueueAttributeNameFifoQueue)] == "true"; want != got {
		return "", "", fmt.Errorf("producer: queue %s exists and is not the queue type asked for (FIFO %v)", name, want)
	}
	return url, a.Attributes[string(types.QueueAttributeNameQueueArn)], nil
}

func queueExists(err error) bool {
	var qe *types.QueueNameExists
	if errors.As(err, &qe) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "QueueAlreadyExists" || ae.ErrorCode() == "QueueNameExists")
}
