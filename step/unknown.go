package step

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// marked is an error marked as leaving a step's outcome unknown, or as a
// failure after which the step's effect certainly did not happen.
type marked struct {
	err     error
	unknown bool
}

func (m *marked) Error() string { return m.err.Error() }

func (m *marked) Unwrap() error { return m.err }

// Unknown marks err as leaving the step's outcome unknown: the call may
// have had its effect (a 5xx after the request was sent, an answer that
// could not be read). A nil err stays nil.
func Unknown(err error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, unknown: true}
}

// NotApplied marks err as a failure after which the step's effect
// certainly did not happen (the downstream refused the call, or it was
// never sent), whatever [IsUnknown] would say of it. A nil err stays nil.
func NotApplied(err error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, unknown: false}
}

// isNotApplied reports whether err was marked with NotApplied.
func isNotApplied(err error) bool {
	m, ok := errors.AsType[*marked](err)
	return ok && !m.unknown
}

// IsUnknown is the default Options.UnknownFunc. An error marked with
// [Unknown] or [NotApplied] is what its mark says (the outermost mark
// wins). Otherwise these leave the outcome unknown, as they can happen
// after the downstream received the call:
//
//   - a context's end (context.DeadlineExceeded, context.Canceled): the
//     step's own Timeout, the handler's deadline or a cancellation that
//     cut the call short;
//   - a net.Error whose Timeout() is true;
//   - a connection closed under the call: io.EOF, io.ErrUnexpectedEOF,
//     syscall.ECONNRESET, ECONNABORTED and EPIPE (net/http wraps them).
//
// Any other error is a failure of known outcome: the effect did not
// happen (a refused connection, an answer saying so).
func IsUnknown(err error) bool {
	if err == nil {
		return false
	}
	if m, ok := errors.AsType[*marked](err); ok {
		return m.unknown
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	for _, target := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
