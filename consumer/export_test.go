package consumer

import (
	"context"

	"github.com/sqsonce/sqsonce/internal/pipeline"
)

// LogSettled lets the external tests write a settled line directly.
var LogSettled = pipeline.LogSettled

// NewProcess returns the per-message path configured from cfg, for the
// external tests and benchmarks that run it without a Consumer.
var NewProcess = func(cfg Config) func(ctx context.Context, msg *Message) Result {
	return pipeline.New(cfg.processing()).Process
}

// WithSampleRand returns cfg whose backlog sampler draws its jitter from
// rnd (uniform in [0, 1)) instead of math/rand.
func WithSampleRand(cfg Config, rnd func() float64) Config {
	cfg.sampleRand = rnd
	return cfg
}
