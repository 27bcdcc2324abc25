package consumer

import (
	"testing"
	"unsafe"
)

// TestReceivedMessageSize: a received message's record and Message are
// one allocation per message, the consumer's largest, so their size is
// most of what it gives the garbage collector per message. Without
// Limits there is no room for a key limit in it (limitedMessage has it),
// and the receive's start is kept as a Duration, so that it fits the
// allocator's 416-byte size class, not the 512-byte one.
func TestReceivedMessageSize(t *testing.T) {
	const most = 416
	if got := unsafe.Sizeof(receivedMessage{}); got > most {
		t.Errorf("receivedMessage is %d bytes, want at most %d (a size class of the Go allocator)", got, most)
	}
}
