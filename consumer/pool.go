package consumer

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
)

// calls is how many SQS calls the consumer can have in flight at once:
// its receivers, the batcher's senders, the heartbeat's batch calls and a
// dead letter's send.
func (cfg Config) calls() int {
	return cfg.Receivers + cfg.aheadReceivers + cfg.batchSenders() + heartbeat.DefaultParallel + 1
}

// batchSenders is how many delete (and visibility) calls the batcher makes at
// once: as many as receives.
func (cfg Config) batchSenders() int { return max(8, cfg.Receivers+cfg.aheadReceivers) }

// pooledSQS passes every call on with one more option, pool.option, which
// makes the call on an HTTP client that keeps enough idle connections for
// the consumer's calls at once and keeps every response (sdkhttp). The
// SDK's default client keeps 10 per host: with more calls at once, each
// call beyond them opens a connection (a TLS handshake, on AWS) and closes
// it after. The option reaches the SDK's client through any wrapper that
// passes options on; fakes ignore it.
type pooledSQS struct {
	SQSAPI
	opts []func(*sqs.Options) // pool.option alone
}

func newPooledSQS(client SQSAPI, n int) *pooledSQS {
	p := &pool{n: n}
	return &pooledSQS{SQSAPI: client, opts: []func(*sqs.Options){p.option}}
}

// with appends the pool's option to the caller's.
func (c *pooledSQS) with(o []func(*sqs.Options)) []func(*sqs.Options) {
	if len(o) == 0 {
		return c.opts
	}
	return append(o[:len(o):len(o)], c.opts...)
}

func (c *pooledSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return c.SQSAPI.ReceiveMessage(ctx, in, c.with(o)...)
}

func (c *pooledSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return c.SQSAPI.DeleteMessage(ctx, in, c.with(o)...)
}

func (c *pooledSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return c.SQSAPI.DeleteMessageBatch(ctx, in, c.with(o)...)
}

func (c *pooledSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return c.SQSAPI.ChangeMessageVisibility(ctx, in, c.with(o)...)
}

func (c *pooledSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return c.SQSAPI.ChangeMessageVisibilityBatch(ctx, in, c.with(o)...)
}

func (c *pooledSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return c.SQSAPI.SendMessage(ctx, in, c.with(o)...)
}

func (c *pooledSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return c.SQSAPI.GetQueueAttributes(ctx, in, c.with(o)...)
}

func (c *pooledSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return c.SQSAPI.GetQueueUrl(ctx, in, c.with(o)...)
}

// pool swaps the SDK's own HTTP client (awshttp.BuildableClient, the
// default) for a copy that keeps n idle connections per host, made once
// per client it meets (a client that keeps n or more is used as it is),
// and guards the client (sdkhttp.Guard) so that no call loses its response
// to the race between the SDK's request body and net/http, and each
// request goes out in one write; any other HTTP client is guarded alone.
type pool struct {
	n    int
	last atomic.Pointer[poolSwap]
	mu   sync.Mutex // making a copy
}

// poolSwap is the HTTP client to use in place of from.
type poolSwap struct {
	from *awshttp.BuildableClient
	to   sqs.HTTPClient
}

func (p *pool) option(o *sqs.Options) {
	inner, _ := sdkhttp.Unwrap(o.HTTPClient) // guarded by an option before this one
	b, ok := inner.(*awshttp.BuildableClient)
	if !ok {
		o.HTTPClient = sdkhttp.Guard(o.HTTPClient)
		return
	}
	if s := p.last.Load(); s != nil && s.from == b {
		o.HTTPClient = s.to
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.last.Load()
	if s == nil || s.from != b {
		to := b
		if b.GetTransport().MaxIdleConnsPerHost < p.n {
			to = b.WithTransportOptions(func(t *http.Transport) { t.MaxIdleConnsPerHost = p.n })
		}
		s = &poolSwap{from: b, to: sdkhttp.Guard(to)}
		p.last.Store(s)
	}
	o.HTTPClient = s.to
}
