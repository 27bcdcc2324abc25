package outbox_test

import (
	"context"
	"fmt"

	"github.com/sqsonce/sqsonce/outbox"
)

// Events of one entity are handed to the relay one at a time, in commit
// order; other entities are not held up.
func ExampleMemory() {
	ctx := context.Background()
	store := outbox.NewMemory(outbox.MemoryConfig{})
	_ = store.Put(ctx, outbox.Event{ID: "a1", Entity: "acct-a", Payload: `{"amount":5}`})
	_ = store.Put(ctx,
		outbox.Event{ID: "a2", Entity: "acct-a", Payload: `{"amount":7}`},
		outbox.Event{ID: "b1", Entity: "acct-b", Payload: `{"amount":1}`})
	for round := 1; ; round++ {
		evs, _ := store.Due(ctx, "relay-1", 10)
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			fmt.Println(round, ev.Entity, ev.ID)
		}
		_ = store.Published(ctx, evs)
	}
	// Output:
	// 1 acct-a a1
	// 1 acct-b b1
	// 2 acct-a a2
}
