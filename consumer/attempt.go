package consumer

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"time"
)

// A receiver's bookkeeping between its ReceiveMessage calls is decided
// here, apart from the calls: which ReceiveRequestAttemptId a FIFO
// receive carries, whether a failed receive is retried with the slots it
// held, how long to back off, and what a receive's result tells the
// receive-ahead capacity. receive only carries the decisions out.
//
// On a FIFO queue every receive carries a ReceiveRequestAttemptId. When a
// receive fails (its response may have been lost after SQS handed out the
// messages and locked their groups), the next try repeats it with the same
// attempt id and size, so SQS returns the same messages instead of keeping
// their groups locked for a whole visibility timeout. A successful receive,
// or one retried for longer than SQS keeps an attempt id, starts a new id.

// maxAttemptAge is how long a receive is retried with the same
// ReceiveRequestAttemptId: SQS keeps one for 5 minutes.
const maxAttemptAge = 4 * time.Minute

// Backoff between failed receives: the wait is drawn from [0, ceiling],
// the ceiling growing by receiveBackoffStep per failure in a row up to
// receiveBackoffMax.
const (
	receiveBackoffStep = 200 * time.Millisecond
	receiveBackoffMax  = 5 * time.Second
)

// receiveState is one receiver's bookkeeping between its calls. The zero
// value is a receiver about to make its first receive.
type receiveState struct {
	// attemptID is the ReceiveRequestAttemptId of the FIFO receive being
	// retried; "" when the next receive is a new one.
	attemptID string
	// attemptStart is when that receive was first made.
	attemptStart time.Time
	// failures counts the receives failed in a row.
	failures int
}

// receiveCall is how to make the next call.
type receiveCall struct {
	// attemptID is the ReceiveRequestAttemptId to send; "" on a standard
	// queue.
	attemptID string
	// start is when the receive began: SQS's 12 hours may count from the
	// first try of a FIFO receive that is retried.
	start time.Time
}

// nextReceive returns how to make a receive at now, and the state
// meanwhile. On a FIFO queue a receive being retried keeps its attempt id
// and start while SQS still knows the id (maxAttemptAge); otherwise it
// gets a new id from newID.
func nextReceive(s receiveState, fifo bool, now time.Time, newID func() string) (receiveState, receiveCall) {
	if !fifo {
		return s, receiveCall{start: now}
	}
	if s.attemptID == "" || now.Sub(s.attemptStart) > maxAttemptAge {
		s.attemptID, s.attemptStart = newID(), now
	}
	return s, receiveCall{attemptID: s.attemptID, start: s.attemptStart}
}

// receiveAction is what a receive's result asks of the receiver.
type receiveAction struct {
	// release is how many of the slots the receive held go back to the
	// capacity: the ones it got no message for, or, after a failure on a
	// standard queue, all of them.
	release int
	// keep: after a failure on a FIFO queue the slots stay held, so that
	// the retry asks for as many messages as the lost response held.
	keep bool
	// backoff is, after a failure, the ceiling of the random wait before
	// the next try.
	backoff time.Duration
	// short: the receive got fewer messages than it asked for (empty: none
	// at all), which lowers receive-ahead (capacity.short).
	short, empty bool
	// full: the receive got all it asked for and was no retry, so the
	// queue has a backlog (capacity.observe).
	full bool
}

// afterReceive returns what a receive that held asked slots asks of the
// receiver, and the state for the next: got is how many messages it
// returned, or -1 when it failed.
func afterReceive(s receiveState, fifo bool, asked, got int) (receiveState, receiveAction) {
	if got < 0 {
		s.failures++
		a := receiveAction{backoff: min(time.Duration(s.failures)*receiveBackoffStep, receiveBackoffMax)}
		if fifo {
			a.keep = true
		} else {
			a.release = asked
		}
		return s, a
	}
	var a receiveAction
	if extra := asked - got; extra > 0 {
		a.release, a.short, a.empty = extra, true, got == 0
	} else if s.failures == 0 {
		a.full = true
	}
	return receiveState{}, a
}

// newAttemptID returns a fresh ReceiveRequestAttemptId: 32 hex digits,
// in one allocation (one per FIFO receive).
func newAttemptID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	var out [32]byte
	hex.Encode(out[:], b[:])
	return string(out[:])
}
