package redrive

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqserr"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// DLQ is a dead-letter queue and what feeds it.
type DLQ struct {
	Queue
	// Sources are the queues whose RedrivePolicy names this DLQ.
	Sources []Queue `json:"sources"`
	// OldestAge is the age (see [Entry.Age]) of the oldest of up to 10
	// sampled messages (made visible again at once); 0 when the queue
	// looked empty.
	OldestAge time.Duration `json:"oldest_age_ns"`
}

// ListProgress reports List's progress: done of total queues examined.
type ListProgress struct {
	Done, Total int
}

// List returns every dead-letter queue visible to the client with its
// source queues, approximate message counts and the age of its oldest
// sampled message. Sources come from ListDeadLetterSourceQueues; where the
// server does not implement that call, from every queue's RedrivePolicy.
// progress, when not nil, is called after each queue is examined.
func (r *Redriver) List(ctx context.Context, progress func(ListProgress)) ([]DLQ, error) {
	urls, err := r.queueURLs(ctx, "")
	if err != nil {
		return nil, err
	}
	queues := make([]Queue, 0, len(urls))
	byURL := map[string]Queue{}
	for i, u := range urls {
		q, err := r.describe(ctx, u)
		if err != nil {
			if sqserr.QueueMissing(err) { // deleted while we listed
				continue
			}
			return nil, err
		}
		queues = append(queues, q)
		byURL[u] = q
		if progress != nil {
			progress(ListProgress{Done: i + 1, Total: len(urls) * 2})
		}
	}
	native := true
	var dlqs []DLQ
	for i, q := range queues {
		var srcs []Queue
		if native {
			srcURLs, err := r.nativeSources(ctx, q.URL)
			switch {
			case err == nil:
				for _, s := range srcURLs {
					if sq, ok := byURL[s]; ok {
						srcs = append(srcs, sq)
					} else {
						srcs = append(srcs, Queue{URL: s, Name: nameOf(s)})
					}
				}
			case isUnsupported(err):
				native = false
			case sqserr.QueueMissing(err):
				continue
			default:
				return nil, err
			}
		}
		if !native {
			srcs = policySources(q, queues)
		}
		if len(srcs) > 0 {
			d := DLQ{Queue: q, Sources: srcs}
			d.OldestAge, err = r.oldest(ctx, q)
			if err != nil && !sqserr.QueueMissing(err) {
				return nil, err
			}
			dlqs = append(dlqs, d)
		}
		if progress != nil {
			progress(ListProgress{Done: len(queues) + i + 1, Total: len(queues) * 2})
		}
	}
	return dlqs, nil
}

// Sources returns the source queues of a DLQ, by ListDeadLetterSourceQueues
// or, where the server lacks it, by reading every queue's RedrivePolicy.
func (r *Redriver) Sources(ctx context.Context, dlq Queue) ([]Queue, error) {
	urls, err := r.nativeSources(ctx, dlq.URL)
	if err == nil {
		out := make([]Queue, 0, len(urls))
		for _, u := range urls {
			q, err := r.describe(ctx, u)
			if err != nil {
				return nil, err
			}
			out = append(out, q)
		}
		return out, nil
	}
	if !isUnsupported(err) {
		return nil, err
	}
	all, err := r.queueURLs(ctx, "")
	if err != nil {
		return nil, err
	}
	queues := make([]Queue, 0, len(all))
	for _, u := range all {
		q, err := r.describe(ctx, u)
		if err != nil {
			if sqserr.QueueMissing(err) {
				continue
			}
			return nil, err
		}
		queues = append(queues, q)
	}
	return policySources(dlq, queues), nil
}

// policySources returns the queues whose RedrivePolicy targets dlq.
func policySources(dlq Queue, queues []Queue) []Queue {
	var out []Queue
	for _, s := range queues {
		if dlq.ARN != "" && s.DeadLetterTargetARN == dlq.ARN {
			out = append(out, s)
		}
	}
	return out
}

// nativeSources calls ListDeadLetterSourceQueues, all pages.
func (r *Redriver) nativeSources(ctx context.Context, dlqURL string) ([]string, error) {
	var out []string
	in := &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlqURL), MaxResults: aws.Int32(1000)}
	for {
		page, err := r.client.ListDeadLetterSourceQueues(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("redrive: list dead-letter source queues: %w", err)
		}
		out = append(out, page.QueueUrls...)
		if aws.ToString(page.NextToken) == "" {
			slices.Sort(out)
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// Queues returns every queue whose name starts with prefix ("": every
// queue visible to the client), with its approximate counts, sorted by
// URL. It only reads queue attributes: no message is received.
func (r *Redriver) Queues(ctx context.Context, prefix string) ([]Queue, error) {
	urls, err := r.queueURLs(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Queue, 0, len(urls))
	for _, u := range urls {
		q, err := r.describe(ctx, u)
		if err != nil {
			if sqserr.QueueMissing(err) { // deleted while we listed
				continue
			}
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// OldestAge samples up to 10 messages of a DLQ, makes them visible again
// at once, and returns the largest age (see [Entry.Age]) among them; 0
// when none came. The sample is a receive: it counts against each
// message's receive count, so use it on dead-letter queues, never on a
// queue that consumers read.
func (r *Redriver) OldestAge(ctx context.Context, dlq Queue) (time.Duration, error) {
	return r.oldest(ctx, dlq)
}

// queueURLs lists the queues whose names start with prefix, all pages.
func (r *Redriver) queueURLs(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	in := &sqs.ListQueuesInput{MaxResults: aws.Int32(1000)}
	if prefix != "" {
		in.QueueNamePrefix = aws.String(prefix)
	}
	for {
		page, err := r.client.ListQueues(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("redrive: list queues: %w", err)
		}
		out = append(out, page.QueueUrls...)
		if aws.ToString(page.NextToken) == "" {
			slices.Sort(out)
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// oldest samples up to 10 messages, makes them visible again at once, and
// returns the largest age among them.
func (r *Redriver) oldest(ctx context.Context, q Queue) (time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, receiveMargin)
	defer cancel()
	out, err := r.client.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.URL),
		MaxNumberOfMessages:         sqslimits.MaxBatchEntries,
		VisibilityTimeout:           1, // 0 would mean the queue's default
		WaitTimeSeconds:             0,
		MessageAttributeNames:       []string{deadletter.AttrFailure},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
	}, sdkhttp.SQS)
	if err != nil {
		return 0, fmt.Errorf("redrive: sample %s: %w", q.Name, err)
	}
	now := r.now()
	var oldest time.Duration
	handles := make([]string, 0, len(out.Messages))
	for _, m := range out.Messages {
		handles = append(handles, aws.ToString(m.ReceiptHandle))
	}
	r.release(ctx, q, handles)
	for _, m := range out.Messages {
		e := r.entry(delivery.New(m, q.URL, now))
		oldest = max(oldest, e.Age)
	}
	return oldest, nil
}

// targetARN reads deadLetterTargetArn from a RedrivePolicy.
func targetARN(policy string) string {
	if policy == "" {
		return ""
	}
	var p struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if json.Unmarshal([]byte(policy), &p) != nil {
		return ""
	}
	return p.DeadLetterTargetArn
}
