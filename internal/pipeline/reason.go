package pipeline

import (
	"errors"
	"strings"

	"github.com/sqsonce/sqsonce/sqsmsg"
)

// HandlerText returns err's text without the prefixes of sqsonce's own
// control-flow wrappers: Permanent(fmt.Errorf("charge o7: %w", e)) reads
// "charge o7: 422 ...", not "permanent: charge o7: 422 ...", and
// RetryAfter(e, d) reads as e. The class and the delay are recorded beside
// the text (in the dead letter's deadletter.Failure and the settled log
// line), so the prefix would only repeat them. A wrapper anywhere in err's chain is
// replaced by its inner error's text, so context the handler added around
// it ("order o7: permanent: ...") stays, without the prefix.
func HandlerText(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	visitWrappers(err, func(w error, inner error) {
		full := w.Error()
		if i := strings.Index(text, full); i >= 0 {
			text = text[:i] + errString(inner) + text[i+len(full):]
		}
	})
	return text
}

// visitWrappers calls fn for each [sqsmsg.PermanentError] and
// [sqsmsg.RetryError] in err's tree, outermost first, with the error it
// wraps.
func visitWrappers(err error, fn func(w, inner error)) {
	for err != nil {
		switch e := err.(type) {
		case *sqsmsg.PermanentError:
			fn(e, e.Err)
		case *sqsmsg.RetryError:
			fn(e, e.Err)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, sub := range u.Unwrap() {
				visitWrappers(sub, fn)
			}
			return
		default:
			err = errors.Unwrap(err)
		}
	}
}

// errString is err's text; "<nil>" for nil.
func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
