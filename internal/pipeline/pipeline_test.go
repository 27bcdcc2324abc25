package pipeline

import (
	"context"
	"strings"
	"testing"
)

type (
	config  struct{ name string }
	message struct{ body string }
	result  struct{ text string }
)

// TestGet: what was registered comes back when the same types are named,
// and naming others fails at once, saying what was registered.
func TestGet(t *testing.T) {
	Register(Funcs[config, *message, result]{
		New: func(cfg config) func(context.Context, *message) result {
			return func(_ context.Context, m *message) result { return result{cfg.name + ":" + m.body} }
		},
	})
	f := Get[config, *message, result]()
	if got := f.New(config{"c"})(context.Background(), &message{"b"}); got.text != "c:b" {
		t.Fatalf("registered path returned %q, want %q", got.text, "c:b")
	}

	defer func() {
		v := recover()
		if s, ok := v.(string); !ok || !strings.Contains(s, "pipeline.config") {
			t.Fatalf("Get with other types: recovered %v, want a panic naming the registered types", v)
		}
	}()
	Get[config, message, result]()
}
