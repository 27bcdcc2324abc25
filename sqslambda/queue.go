package sqslambda

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/settle"
)

// queue is what the adapter knows about one source queue. It is cached
// across invocations: the URL, the visibility timeout and the dead-letter
// queue are read once (failed reads are retried on the next use).
type queue struct {
	arn  string
	fifo bool

	mu         sync.Mutex
	url        string
	attrsRead  bool
	visibility time.Duration // the queue's VisibilityTimeout; 0 when unknown
	redrive    string        // the RedrivePolicy attribute
	dlqURL     string
	dlqFIFO    bool
	maxSize    int  // the queue's MaximumMessageSize; 0 when unknown
	dlqMaxSize int  // the dead-letter queue's MaximumMessageSize; 0 when unknown
	dlqSized   bool // dlqMaxSize was read (or could not be)
	checked    bool // the timeout check ran for this queue
}

// queueFor returns the cached queue for an eventSourceARN. With
// Config.QueueURL set, every record belongs to that one queue.
func (h *Handler) queueFor(arn string) *queue {
	key := arn
	if h.cfg.QueueURL != "" {
		key = ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	q, ok := h.queues[key]
	if !ok {
		q = &queue{arn: arn, url: h.cfg.QueueURL}
		if a, err := settle.ParseARN(arn); err == nil {
			q.fifo = a.FIFO()
		}
		if strings.HasSuffix(h.cfg.QueueURL, ".fifo") {
			q.fifo = true
		}
		h.queues[key] = q
	}
	return q
}

// resolveURL returns the queue's URL: Config.QueueURL, else GetQueueUrl
// with the name and account of the ARN.
func (h *Handler) resolveURL(ctx context.Context, q *queue) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.url != "" {
		return q.url, nil
	}
	a, err := settle.ParseARN(q.arn)
	if err != nil {
		return "", err
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(a.Name)}
	if a.Account != "" {
		in.QueueOwnerAWSAccountId = aws.String(a.Account)
	}
	out, err := h.client.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("sqslambda: get URL of queue %s: %w", q.arn, err)
	}
	q.url = aws.ToString(out.QueueUrl)
	return q.url, nil
}

// readAttributes reads the queue's VisibilityTimeout and RedrivePolicy once.
func (h *Handler) readAttributes(ctx context.Context, q *queue) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.attrsRead {
		return nil
	}
	out, err := h.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q.url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameVisibilityTimeout,
			types.QueueAttributeNameRedrivePolicy,
			types.QueueAttributeNameMaximumMessageSize,
		},
	})
	if err != nil {
		return fmt.Errorf("sqslambda: read attributes of queue %s: %w", q.url, err)
	}
	q.maxSize, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)])
	if s, ok := out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)]; ok {
		if secs, err := strconv.Atoi(s); err == nil && secs >= 0 {
			q.visibility = time.Duration(secs) * time.Second
		}
	}
	q.redrive = out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	q.attrsRead = true
	return nil
}

// ErrNoDeadLetterQueue is returned when a message must be dead-lettered
// but neither Config.DeadLetterQueueURL nor the queue's RedrivePolicy names
// a dead-letter queue.
var ErrNoDeadLetterQueue = errors.New("sqslambda: no dead-letter queue: set Config.DeadLetterQueueURL or give the queue a RedrivePolicy")

// deadLetterQueue returns the DLQ URL, whether it is FIFO, and its
// MaximumMessageSize (0 when not known). The first time, it reads the
// DLQ's MaximumMessageSize and warns when it is smaller than the source
// queue's.
func (h *Handler) deadLetterQueue(ctx context.Context, q *queue) (url string, fifo bool, maxSize int, err error) {
	url, fifo, err = h.resolveDeadLetterQueue(ctx, q)
	if err != nil {
		return "", false, 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.dlqSized {
		q.dlqSized = true
		out, err := h.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize},
		})
		if err != nil {
			h.log.Debug("sqslambda: cannot read the dead-letter queue's MaximumMessageSize", zap.String("dlq_url", url), zap.Error(err))
		} else {
			q.dlqMaxSize, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)])
		}
		if q.dlqMaxSize > 0 && q.maxSize > q.dlqMaxSize {
			h.log.Warn("sqslambda: the dead-letter queue's MaximumMessageSize is smaller than the queue's: a large message may not fit in it, and is then left to the queue's maxReceiveCount; raise the dead-letter queue's MaximumMessageSize",
				zap.String("queue_url", q.url), zap.String("dlq_url", url),
				zap.Int("queue_max_message_size", q.maxSize), zap.Int("dlq_max_message_size", q.dlqMaxSize))
		}
	}
	return url, fifo, q.dlqMaxSize, nil
}

// resolveDeadLetterQueue returns the DLQ URL and whether it is FIFO.
func (h *Handler) resolveDeadLetterQueue(ctx context.Context, q *queue) (string, bool, error) {
	if h.cfg.DeadLetterQueueURL != "" {
		return h.cfg.DeadLetterQueueURL, strings.HasSuffix(h.cfg.DeadLetterQueueURL, ".fifo"), nil
	}
	if err := h.readAttributes(ctx, q); err != nil {
		return "", false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dlqURL != "" {
		return q.dlqURL, q.dlqFIFO, nil
	}
	url, fifo, err := settle.DeadLetterQueue(ctx, h.client, "sqslambda", q.redrive)
	if err != nil {
		return "", false, err
	}
	if url == "" {
		return "", false, ErrNoDeadLetterQueue
	}
	q.dlqURL, q.dlqFIFO = url, fifo
	return url, fifo, nil
}
