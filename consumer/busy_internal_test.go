package consumer

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestBusyMeterAcrossShards: the handler time a busyMeter reports is the
// integral of the handlers running, whichever shards their starts and
// ends went to (a start in one shard and its end in another leave each
// shard's count off zero), window by window.
func TestBusyMeterAcrossShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b busyMeter
		b.take()
		for range 100 {
			b.add(1)
		}
		time.Sleep(time.Second)
		for range 50 {
			b.add(-1)
		}
		time.Sleep(time.Second)
		if busy, elapsed := b.take(); busy != 150*time.Second || elapsed != 2*time.Second {
			t.Errorf("first window: busy %v over %v, want 2m30s over 2s", busy, elapsed)
		}
		time.Sleep(time.Second)
		for range 50 {
			b.add(-1)
		}
		time.Sleep(time.Second)
		if busy, elapsed := b.take(); busy != 50*time.Second || elapsed != 2*time.Second {
			t.Errorf("second window: busy %v over %v, want 50s over 2s", busy, elapsed)
		}
		time.Sleep(time.Second)
		if busy, _ := b.take(); busy != 0 {
			t.Errorf("idle window: busy %v, want 0", busy)
		}
	})
}
