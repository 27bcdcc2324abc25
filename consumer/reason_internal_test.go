package consumer

import (
	"errors"
	"fmt"
	"testing"
	"time"
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
		{Permanent(base), "422"},
		{Permanent(Permanent(base)), "422"},
		{Permanent(nil), "permanent failure"},
		{fmt.Errorf("order o7: %w", Permanent(fmt.Errorf("charge: %w", base))), "order o7: charge: 422"},
		{RetryAfter(base, time.Second), "422"},
		{fmt.Errorf("%w (dead-letter send failed: %v)", Permanent(base), errors.New("throttled")), "422 (dead-letter send failed: throttled)"},
		{errors.Join(Permanent(errors.New("a")), errors.New("b")), "a\nb"},
		{&PanicError{Value: "boom"}, "panic: boom"},
	}
	for _, tt := range tests {
		if got := handlerText(tt.err); got != tt.want {
			t.Errorf("handlerText(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
