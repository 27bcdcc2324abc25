package pipeline

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/sqsmsg"
)

func TestHandlerText(t *testing.T) {
	t.Parallel()
	base := errors.New("422")
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{base, "422"},
		{sqsmsg.Permanent(base), "422"},
		{sqsmsg.Permanent(sqsmsg.Permanent(base)), "422"},
		{sqsmsg.Permanent(nil), "permanent failure"},
		{fmt.Errorf("order o7: %w", sqsmsg.Permanent(fmt.Errorf("charge: %w", base))), "order o7: charge: 422"},
		{sqsmsg.RetryAfter(base, time.Second), "422"},
		{fmt.Errorf("%w (dead-letter send failed: %v)", sqsmsg.Permanent(base), errors.New("throttled")), "422 (dead-letter send failed: throttled)"},
		{errors.Join(sqsmsg.Permanent(errors.New("a")), errors.New("b")), "a\nb"},
		{&sqsmsg.PanicError{Value: "boom"}, "panic: boom"},
	}
	for _, tt := range tests {
		if got := HandlerText(tt.err); got != tt.want {
			t.Errorf("HandlerText(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
