package outbox_test

import (
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxtest"
)

func TestMemoryConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		clock := outboxtest.NewClock()
		m := outbox.NewMemory(outbox.MemoryConfig{NowFunc: clock.Now, Lease: 10 * time.Second})
		return outboxtest.Harness{Store: m, Commit: m.Put, Clock: clock, Lease: 10 * time.Second}
	})
}
