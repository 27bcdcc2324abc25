package sqsfake

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

type queue struct {
	name, url, arn string
	attrs          map[string]string // settable attributes, defaults filled
	created        time.Time
	modified       time.Time
	lastPurge      time.Time

	msgs     []*msg // live messages in send order
	handles  map[string]*msg
	dedupe   map[string]dedupeEntry
	attempts map[string]*attempt
	fifoSeq  int64
	sent     []Sent
	tasks    []*moveTask
}

type dedupeEntry struct {
	at        time.Time
	messageID string
	seqNum    string
}

type attempt struct {
	at       time.Time
	msgs     []*msg
	handles  []string
	versions []int
}

func (q *queue) fifo() bool           { return q.attrs["FifoQueue"] == "true" }
func (q *queue) contentDedupe() bool  { return q.attrs["ContentBasedDeduplication"] == "true" }
func (q *queue) intAttr(n string) int { v, _ := strconv.Atoi(q.attrs[n]); return v }
func (q *queue) visibility() time.Duration {
	return time.Duration(q.intAttr("VisibilityTimeout")) * time.Second
}

// redrive returns the DLQ ARN and maxReceiveCount of the queue's
// RedrivePolicy, or "" and 0.
func (q *queue) redrive() (string, int) {
	p := q.attrs["RedrivePolicy"]
	if p == "" {
		return "", 0
	}
	arn, n, err := parseRedrivePolicy(p)
	if err != nil {
		return "", 0
	}
	return arn, n
}

func parseRedrivePolicy(p string) (string, int, error) {
	var rp struct {
		Target string          `json:"deadLetterTargetArn"`
		Max    json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(p), &rp); err != nil {
		return "", 0, fmt.Errorf("RedrivePolicy is not JSON: %v", err)
	}
	s := strings.Trim(string(rp.Max), `"`)
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 {
		return "", 0, fmt.Errorf("maxReceiveCount %q must be 1 to 1000", s)
	}
	if rp.Target == "" {
		return "", 0, fmt.Errorf("deadLetterTargetArn is required")
	}
	return rp.Target, n, nil
}

// attrRange lists the settable numeric attributes with their default and
// documented bounds.
var attrRange = map[string]struct{ def, lo, hi int }{
	"VisibilityTimeout":             {30, 0, int(sqslimits.MaxVisibilitySeconds)},
	"MaximumMessageSize":            {sqslimits.MaxMessageBytes, 1024, sqslimits.MaxMessageBytes},
	"MessageRetentionPeriod":        {345600, int(sqslimits.MinRetention / time.Second), int(sqslimits.MaxRetention / time.Second)},
	"DelaySeconds":                  {0, 0, 900},
	"ReceiveMessageWaitTimeSeconds": {0, 0, int(sqslimits.MaxWaitTimeSeconds)},
}

var otherAttrs = map[string]bool{
	"RedrivePolicy": true, "RedriveAllowPolicy": true, "FifoQueue": true, "ContentBasedDeduplication": true,
	"Policy": true, "KmsMasterKeyId": true, "KmsDataKeyReusePeriodSeconds": true, "SqsManagedSseEnabled": true,
	"DeduplicationScope": true, "FifoThroughputLimit": true,
}

// validateAttrs checks attributes for CreateQueue/SetQueueAttributes.
// Callers hold f.mu.
func (f *Fake) validateAttrs(name string, attrs map[string]string, creating bool) error {
	for k, v := range attrs {
		if r, ok := attrRange[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < r.lo || n > r.hi {
				return &types.InvalidAttributeValue{Message: aws.String(fmt.Sprintf("Invalid value for the parameter %s: %q (must be %d to %d).", k, v, r.lo, r.hi))}
			}
			continue
		}
		if !otherAttrs[k] {
			return &types.InvalidAttributeName{Message: aws.String("Unknown Attribute " + k + ".")}
		}
		switch k {
		case "FifoQueue":
			if !creating {
				return &types.InvalidAttributeName{Message: aws.String("FifoQueue can only be set when the queue is created.")}
			}
			if v != "true" && v != "false" {
				return &types.InvalidAttributeValue{Message: aws.String("Invalid value for the parameter FifoQueue.")}
			}
		case "ContentBasedDeduplication":
			if v != "true" && v != "false" {
				return &types.InvalidAttributeValue{Message: aws.String("Invalid value for the parameter ContentBasedDeduplication.")}
			}
		case "RedrivePolicy":
			if v == "" {
				continue
			}
			arn, _, err := parseRedrivePolicy(v)
			if err != nil {
				return &types.InvalidAttributeValue{Message: aws.String("Value " + v + " for parameter RedrivePolicy is invalid. Reason: " + err.Error())}
			}
			dlq := f.queueByARN(arn)
			if dlq == nil {
				return &types.InvalidAttributeValue{Message: aws.String("Value " + v + " for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.")}
			}
			if dlq.fifo() != strings.HasSuffix(name, ".fifo") {
				return &types.InvalidAttributeValue{Message: aws.String("Value " + v + " for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type of queue as the source.")}
			}
		}
	}
	return nil
}

func (f *Fake) queueByARN(arn string) *queue {
	for _, q := range f.queues {
		if q.arn == arn {
			return q
		}
	}
	return nil
}

func (f *Fake) queueByName(name string) *queue {
	for _, q := range f.queues {
		if q.name == name {
			return q
		}
	}
	return nil
}

func validQueueName(name string) bool {
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" || len(name) > 80 {
		return false
	}
	for _, r := range base {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// CreateQueue creates a queue, or returns the existing one when the name
// exists with the same attributes (QueueNameExists when they differ).
func (f *Fake) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	ft, err := f.begin(ctx, "CreateQueue", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, err := f.createQueue(aws.ToString(in.QueueName), in.Attributes)
	f.mu.Unlock()
	return finish(ctx, "CreateQueue", ft, out, err)
}

func (f *Fake) createQueue(name string, attrs map[string]string) (*sqs.CreateQueueOutput, error) {
	if !validQueueName(name) {
		return nil, invalidParameter("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	fifo := attrs["FifoQueue"] == "true"
	if fifo != strings.HasSuffix(name, ".fifo") {
		return nil, invalidParameter("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix. A standard queue name must not end with .fifo.")
	}
	if !fifo && attrs["ContentBasedDeduplication"] != "" {
		return nil, &types.InvalidAttributeName{Message: aws.String("ContentBasedDeduplication is only valid for FIFO queues.")}
	}
	if err := f.validateAttrs(name, attrs, true); err != nil {
		return nil, err
	}
	full := map[string]string{}
	for k, r := range attrRange {
		full[k] = strconv.Itoa(r.def)
	}
	if fifo {
		full["FifoQueue"] = "true"
		full["ContentBasedDeduplication"] = "false"
	}
	maps.Copy(full, attrs)
	if attrs["FifoQueue"] == "false" {
		delete(full, "FifoQueue")
	}
	if q := f.queueByName(name); q != nil {
		if !maps.Equal(q.attrs, full) {
			return nil, &types.QueueNameExists{Message: aws.String("A queue already exists with the same name and a different value for attribute(s).")}
		}
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
	}
	now := time.Now()
	q := &queue{
		name:     name,
		url:      fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", f.region, f.account, name),
		arn:      fmt.Sprintf("arn:aws:sqs:%s:%s:%s", f.region, f.account, name),
		attrs:    full,
		created:  now,
		modified: now,
		handles:  map[string]*msg{},
		dedupe:   map[string]dedupeEntry{},
		attempts: map[string]*attempt{},
	}
	f.queues[q.url] = q
	f.order = append(f.order, q.url)
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
}

// GetQueueUrl returns the URL of a queue by name.
func (f *Fake) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	ft, err := f.begin(ctx, "GetQueueUrl", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.GetQueueUrlOutput
	if q := f.queueByName(aws.ToString(in.QueueName)); q != nil {
		out = &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}
	} else {
		err = &types.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	f.mu.Unlock()
	return finish(ctx, "GetQueueUrl", ft, out, err)
}

// GetQueueAttributes returns the requested attributes ("All" for every
// one), including QueueArn and the approximate message counts.
func (f *Fake) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	ft, err := f.begin(ctx, "GetQueueAttributes", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, err := f.getQueueAttributes(in)
	f.mu.Unlock()
	return finish(ctx, "GetQueueAttributes", ft, out, err)
}

func (f *Fake) getQueueAttributes(in *sqs.GetQueueAttributesInput) (*sqs.GetQueueAttributesOutput, error) {
	q, err := f.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	q.expire(now)
	all := maps.Clone(q.attrs)
	all["QueueArn"] = q.arn
	all["CreatedTimestamp"] = strconv.FormatInt(q.created.Unix(), 10)
	all["LastModifiedTimestamp"] = strconv.FormatInt(q.modified.Unix(), 10)
	var visible, inflight, delayed int
	for _, m := range q.msgs {
		switch m.state(now) {
		case Visible:
			visible++
		case InFlight:
			inflight++
		case Delayed:
			delayed++
		}
	}
	all["ApproximateNumberOfMessages"] = strconv.Itoa(visible)
	all["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(inflight)
	all["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(delayed)
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == types.QueueAttributeNameAll {
			out = all
			break
		}
		if v, ok := all[string(n)]; ok {
			out[string(n)] = v
		} else if _, known := attrRange[string(n)]; !known && !otherAttrs[string(n)] {
			return nil, &types.InvalidAttributeName{Message: aws.String("Unknown Attribute " + string(n) + ".")}
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

// SetQueueAttributes changes settable attributes (FifoQueue cannot change).
func (f *Fake) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	ft, err := f.begin(ctx, "SetQueueAttributes", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.SetQueueAttributesOutput
	q, err := f.queueByURL(in.QueueUrl)
	if err == nil {
		if q.fifo() {
			err = f.validateAttrs(q.name, in.Attributes, false)
		} else if in.Attributes["ContentBasedDeduplication"] != "" {
			err = &types.InvalidAttributeName{Message: aws.String("ContentBasedDeduplication is only valid for FIFO queues.")}
		} else {
			err = f.validateAttrs(q.name, in.Attributes, false)
		}
	}
	if err == nil {
		for k, v := range in.Attributes {
			if v == "" && k == "RedrivePolicy" {
				delete(q.attrs, k)
				continue
			}
			q.attrs[k] = v
		}
		q.modified = time.Now()
		out = &sqs.SetQueueAttributesOutput{}
		f.wake()
	}
	f.mu.Unlock()
	return finish(ctx, "SetQueueAttributes", ft, out, err)
}

// ListQueues lists queue URLs in creation order, filtered by
// QueueNamePrefix; MaxResults (1 to 1000) pages with NextToken. Without
// MaxResults it returns up to 1000 URLs and no token, as SQS does.
func (f *Fake) ListQueues(ctx context.Context, in *sqs.ListQueuesInput, _ ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	ft, err := f.begin(ctx, "ListQueues", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var urls []string
	for _, u := range f.order {
		if q := f.queues[u]; q != nil && strings.HasPrefix(q.name, aws.ToString(in.QueueNamePrefix)) {
			urls = append(urls, u)
		}
	}
	f.mu.Unlock()
	page, next, err := paginate(urls, in.MaxResults, in.NextToken)
	var out *sqs.ListQueuesOutput
	if err == nil {
		out = &sqs.ListQueuesOutput{QueueUrls: page, NextToken: next}
	}
	return finish(ctx, "ListQueues", ft, out, err)
}

func paginate(all []string, max *int32, token *string) ([]string, *string, error) {
	start := 0
	if token != nil {
		n, err := strconv.Atoi(aws.ToString(token))
		if err != nil || n < 0 || n > len(all) {
			return nil, nil, invalidParameter("Invalid NextToken value.")
		}
		start = n
	}
	if max == nil {
		end := min(len(all), start+1000)
		return slices.Clone(all[start:end]), nil, nil
	}
	if *max < 1 || *max > 1000 {
		return nil, nil, invalidParameter("Value %d for parameter MaxResults is invalid. Reason: Must be between 1 and 1000.", *max)
	}
	end := min(len(all), start+int(*max))
	var next *string
	if end < len(all) {
		next = aws.String(strconv.Itoa(end))
	}
	return slices.Clone(all[start:end]), next, nil
}

// ListDeadLetterSourceQueues lists the queues whose RedrivePolicy targets
// the given queue.
func (f *Fake) ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, _ ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error) {
	ft, err := f.begin(ctx, "ListDeadLetterSourceQueues", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var urls []string
	dlq, err := f.queueByURL(in.QueueUrl)
	if err == nil {
		for _, u := range f.order {
			if q := f.queues[u]; q != nil {
				if arn, _ := q.redrive(); arn == dlq.arn {
					urls = append(urls, u)
				}
			}
		}
	}
	f.mu.Unlock()
	var out *sqs.ListDeadLetterSourceQueuesOutput
	if err == nil {
		var page []string
		var next *string
		page, next, err = paginate(urls, in.MaxResults, in.NextToken)
		if page == nil {
			page = []string{}
		}
		out = &sqs.ListDeadLetterSourceQueuesOutput{QueueUrls: page, NextToken: next}
	}
	return finish(ctx, "ListDeadLetterSourceQueues", ft, out, err)
}

// DeleteQueue deletes a queue and its messages at once (SQS takes up to 60
// seconds; the fake does not model that delay).
func (f *Fake) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, _ ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	ft, err := f.begin(ctx, "DeleteQueue", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.DeleteQueueOutput
	q, err := f.queueByURL(in.QueueUrl)
	if err == nil {
		delete(f.queues, q.url)
		f.order = slices.DeleteFunc(f.order, func(u string) bool { return u == q.url })
		out = &sqs.DeleteQueueOutput{}
		f.wake()
	}
	f.mu.Unlock()
	return finish(ctx, "DeleteQueue", ft, out, err)
}

// PurgeQueue deletes every message of a queue; a second purge within 60
// seconds fails with PurgeQueueInProgress, as in SQS.
func (f *Fake) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, _ ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	ft, err := f.begin(ctx, "PurgeQueue", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.PurgeQueueOutput
	q, err := f.queueByURL(in.QueueUrl)
	now := time.Now()
	if err == nil && !q.lastPurge.IsZero() && now.Sub(q.lastPurge) < purgeInterval {
		err = &types.PurgeQueueInProgress{Message: aws.String("Only one PurgeQueue operation on " + q.name + " is allowed every 60 seconds.")}
	}
	if err == nil {
		q.lastPurge = now
		for _, m := range q.msgs {
			m.deleted = true
		}
		q.msgs = nil
		out = &sqs.PurgeQueueOutput{}
		f.wake()
	}
	f.mu.Unlock()
	return finish(ctx, "PurgeQueue", ft, out, err)
}
