package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// The autoscaling signal: every BacklogInterval a consumer reads its
// queue's backlog and works out how busy its handlers were, and exports
// both with its capacity (see telemetry.Load and "Autoscaling" in
// docs/observability.md). It only reads and reports: receiving never waits for it, and
// a failed read changes nothing but the metric.

// sampleCallTimeout bounds one GetQueueAttributes of the sampler.
const sampleCallTimeout = 10 * time.Second

// sampler is one Run's autoscaling sampler; nil when sampling is off.
type sampler struct {
	interval time.Duration
	capacity int
	rand     func() float64
	mp       metric.MeterProvider
	queueURL string
	busy     busyMeter
}

// newSampler returns the sampler of a Run on queueURL, or nil when cfg
// turns it off (no MeterProvider, or a negative BacklogInterval).
func newSampler(cfg Config, queueURL string) *sampler {
	if cfg.MeterProvider == nil || cfg.BacklogInterval < 0 {
		return nil
	}
	s := &sampler{
		interval: cfg.BacklogInterval,
		capacity: cfg.Concurrency,
		rand:     cfg.sampleRand,
		mp:       cfg.MeterProvider,
		queueURL: queueURL,
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	return s
}

// instrument returns cfg with busy handlers tracked around the whole
// middleware chain (pipeline.Busy: the per-message path counts them, no
// middleware is built per message).
func (s *sampler) instrument(cfg Config) Config {
	if s == nil {
		return cfg
	}
	cfg.Observer = pipeline.Busy(cfg.Observer, s.busy.add)
	return cfg
}

// start samples until ctx ends (a draining consumer reports nothing), in
// a goroutine that wait waits for. client is the one the consumer calls
// SQS with (the sampler's calls are counted with the others).
func (s *sampler) start(ctx context.Context, client SQSAPI, log *zap.Logger) (wait func()) {
	if s == nil {
		return func() {}
	}
	gauges := telemetry.NewLoad(s.mp, s.queueURL, s.capacity)
	s.busy.take() // the first window starts now
	var wg sync.WaitGroup
	wg.Go(func() {
		defer gauges.Close()
		s.run(ctx, client, gauges, log)
	})
	return wg.Wait
}

// wait returns how long to wait for the next sample: a random part of
// the interval for the first, else the interval ± 10%.
func (s *sampler) wait(first bool) time.Duration {
	if first {
		return time.Duration(s.rand() * float64(s.interval))
	}
	return time.Duration((0.9 + 0.2*s.rand()) * float64(s.interval))
}

func (s *sampler) run(ctx context.Context, client SQSAPI, gauges *telemetry.Load, log *zap.Logger) {
	failing := false
	timer := time.NewTimer(s.wait(true))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if busy, elapsed := s.busy.take(); elapsed > 0 && s.capacity > 0 {
			gauges.SetUtilization(min(float64(busy)/(float64(elapsed)*float64(s.capacity)), 1))
		}
		b, err := s.read(ctx, client)
		switch {
		case err == nil:
			gauges.SetBacklog(b)
			if failing {
				log.Info("consumer: reading the queue's backlog works again")
			}
			failing = false
		case ctx.Err() != nil:
			return
		default:
			gauges.ForgetBacklog()
			if failing {
				log.Debug("consumer: reading the queue's backlog failed again", zap.Error(err))
			} else {
				log.Warn("consumer: reading the queue's backlog failed: sqsonce.consumer.queue.backlog is left out of the metrics until a read succeeds (the sampler needs sqs:GetQueueAttributes); receiving goes on",
					zap.Error(err))
			}
			failing = true
		}
		timer.Reset(s.wait(false))
	}
}

// read returns the queue's backlog. A count missing from the answer, or
// not a count, is an error: never a 0 an autoscaler would act on.
func (s *sampler) read(ctx context.Context, client SQSAPI) (telemetry.Backlog, error) {
	ctx, cancel := context.WithTimeout(ctx, min(s.interval, sampleCallTimeout))
	defer cancel()
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(s.queueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return telemetry.Backlog{}, fmt.Errorf("consumer: read the backlog of %s: %w", s.queueURL, err)
	}
	var b telemetry.Backlog
	for _, c := range []struct {
		name types.QueueAttributeName
		n    *int64
	}{
		{types.QueueAttributeNameApproximateNumberOfMessages, &b.Visible},
		{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, &b.InFlight},
		{types.QueueAttributeNameApproximateNumberOfMessagesDelayed, &b.Delayed},
	} {
		v, ok := out.Attributes[string(c.name)]
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 {
			return telemetry.Backlog{}, fmt.Errorf("consumer: read the backlog of %s: %s is %q, not a count", s.queueURL, c.name, v)
		}
		*c.n = n
	}
	return b, nil
}

// busyMeter adds up the time handlers were running: the integral over
// time of how many ran at once. Every handler's start and end changes
// it, so it is kept in shards, each a running count and its integral
// under a lock of its own, and an add goes to a shard picked at random:
// with one lock, the workers of a busy consumer queued on it twice per
// message. The integral is linear, so a handler may start in one shard
// and end in another (a shard's count may go below zero); take adds the
// shards up.
type busyMeter struct {
	shards [busyShards]busyShard
	takeMu sync.Mutex
	start  time.Time // the last take: the current window's start (takeMu held)
}

// busyShards is the number of shards of a busyMeter.
const busyShards = 8

// busyShard is one shard of a busyMeter, padded to a cache line of its
// own.
type busyShard struct {
	mu      sync.Mutex
	running int
	since   time.Time     // last change of running, or last take
	area    time.Duration // handler time since the last take, up to since
	_       [16]byte
}

// add changes the number of running handlers by delta, now.
func (b *busyMeter) add(delta int) {
	s := &b.shards[rand.Uint32()%busyShards]
	s.mu.Lock()
	now := time.Now()
	s.area += time.Duration(s.running) * now.Sub(s.since)
	s.since = now
	s.running += delta
	s.mu.Unlock()
}

// take returns the handler time since the last take and the time passed
// since then, and starts a new window. It holds every shard's lock, so
// that the shards are added up at one instant.
func (b *busyMeter) take() (busy, elapsed time.Duration) {
	b.takeMu.Lock()
	defer b.takeMu.Unlock()
	for i := range b.shards {
		b.shards[i].mu.Lock()
	}
	now := time.Now()
	for i := range b.shards {
		s := &b.shards[i]
		s.area += time.Duration(s.running) * now.Sub(s.since)
		busy += s.area
		s.area, s.since = 0, now
		s.mu.Unlock()
	}
	// Windows are back to back: this one ends where the last take's did.
	elapsed = now.Sub(b.start)
	b.start = now
	return busy, elapsed
}
