package sqslambda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// VisibilityFactor is AWS's recommendation for a queue behind a Lambda
// event source mapping: a visibility timeout of at least six times the
// function timeout, so a batch retried after a throttle or an error is not
// received again while its first invocation still runs.
const VisibilityFactor = 6

// TimeoutError reports a queue whose visibility timeout is shorter than
// VisibilityFactor times the function timeout.
type TimeoutError struct {
	QueueURL        string
	Visibility      time.Duration
	FunctionTimeout time.Duration
}

func (e *TimeoutError) Error() string {
	want := VisibilityFactor * e.FunctionTimeout
	return fmt.Sprintf("sqslambda: queue %s has a visibility timeout of %s, less than %d × the function timeout %s: "+
		"set the queue's VisibilityTimeout to at least %s (AWS's recommendation), or messages may be received again while a batch still runs",
		e.QueueURL, e.Visibility, VisibilityFactor, e.FunctionTimeout, want)
}

// ErrUnknownTimeouts is returned by [Handler.Check] when it cannot know
// both timeouts yet (no QueueURL, or no function timeout before the first
// invocation); the check then runs on the first invocation.
var ErrUnknownTimeouts = errors.New("sqslambda: timeout check deferred to the first invocation: the queue URL or the function timeout is not known yet")

// Check is the start-up check, to call from main or init: it warns when
// the dead-letter queue's MaximumMessageSize is smaller than the queue's,
// and compares the function timeout (Config.FunctionTimeout, AWS_LAMBDA_FUNCTION_TIMEOUT)
// with the visibility timeout of Config.QueueURL and logs a warning, and
// returns a [*TimeoutError], when the visibility is less than
// VisibilityFactor times the timeout. It returns [ErrUnknownTimeouts] when
// one of them is not known yet (the first invocation then checks, with
// the timeout taken from its deadline), or the error of reading the
// queue's attributes. None of these need stop the function: the warning
// is the point.
func (h *Handler) Check(ctx context.Context) error {
	if h.cfg.QueueURL == "" || h.functionTimeout() == 0 {
		return ErrUnknownTimeouts
	}
	q := h.queueFor("")
	if err := h.readAttributes(ctx, q); err != nil {
		h.log.Warn("sqslambda: timeout check: cannot read the queue's visibility timeout", zap.String("queue_url", q.url), zap.Error(err))
		return err
	}
	// Warns when the dead-letter queue takes smaller messages than the
	// queue; a queue without one is not this check's business.
	_, _, _, _ = h.deadLetterQueue(ctx, q)
	return h.checkQueue(q)
}

// checkQueue compares the timeouts for q once both are known, logging a
// warning the first time they break the recommendation.
func (h *Handler) checkQueue(q *queue) error {
	timeout := h.functionTimeout()
	q.mu.Lock()
	vis, read, url := q.visibility, q.attrsRead, q.url
	if h.cfg.Visibility > 0 {
		vis, read = h.cfg.Visibility, true
	}
	if !read || timeout == 0 {
		q.mu.Unlock()
		return ErrUnknownTimeouts
	}
	first := !q.checked
	q.checked = true
	q.mu.Unlock()
	if vis >= VisibilityFactor*timeout {
		return nil
	}
	err := &TimeoutError{QueueURL: url, Visibility: vis, FunctionTimeout: timeout}
	if first {
		h.log.Warn("sqslambda: the queue's visibility timeout is too short for the function timeout",
			zap.String("queue_url", url),
			zap.Duration("visibility_timeout", vis),
			zap.Duration("function_timeout", timeout),
			zap.Duration("recommended_visibility_timeout", VisibilityFactor*timeout),
			zap.Error(err))
	}
	return err
}

func (h *Handler) functionTimeout() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.timeout
}

// learnTimeout records the function timeout from the first invocation's
// deadline (the time left, rounded up to a second) when it is not known.
func (h *Handler) learnTimeout(left time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timeout == 0 && left > 0 {
		h.timeout = left.Round(time.Second)
		if h.timeout < left {
			h.timeout += time.Second
		}
	}
}

// timeoutFromEnv reads AWS_LAMBDA_FUNCTION_TIMEOUT: whole seconds, or a
// Go duration. It returns 0 when unset or invalid.
func timeoutFromEnv() time.Duration {
	s := strings.TrimSpace(os.Getenv("AWS_LAMBDA_FUNCTION_TIMEOUT"))
	if s == "" {
		return 0
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return 0
}
