package consumer

import "context"

// LogSettled lets the external tests write a settled line directly.
var LogSettled = logSettled

// NewProcess returns the per-message path configured from cfg, for the
// external tests and benchmarks that run it without a Consumer.
var NewProcess = func(cfg Config) func(ctx context.Context, msg *Message) Result {
	return newProcessor(cfg).process
}
