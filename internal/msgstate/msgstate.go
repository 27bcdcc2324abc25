// Package msgstate holds the part of a [sqsmsg.Message] that only this
// module's runtimes write: its dedupe key, the body SQS carried when the
// producer's was read from S3 or decompressed, the receives in which it
// did not run, the heartbeat interval and the functions registered with
// Message.OnHeartbeat.
//
// A Message embeds a [State] under an unexported name, so that none of it
// is visible to users, and the functions here reach it through
// [Carrier]: *sqsmsg.Message implements Carrier by that embedding (the
// method of *State is promoted), and so does *State itself. sqsmsg
// itself calls them with the embedded State.
//
// [sqsmsg.Message]: https://pkg.go.dev/github.com/sqsonce/sqsonce/sqsmsg#Message
package msgstate

import (
	"context"
	"sync"
	"time"

	"github.com/sqsonce/sqsonce/internal/payload"
)

// State is a message's runtime state. The zero value is a message with no
// key, run outside a consumer.
type State struct {
	key string

	// wire is the body SQS carried, when decoded says Body was read from
	// S3 or decompressed (see pipeline's decode).
	wire    string
	decoded bool
	// object is the S3 object the body is in; nil when it was in the
	// message.
	object *payload.Pointer
	// dropObject: delete object once the message is deleted (an ack with
	// PayloadConfig.DeleteAfterAck).
	dropObject bool

	// unrun counts the receives in which the message did not run, as far
	// as this process knows (settle.Unrun): set by the consumer on FIFO
	// queues.
	unrun int
	// beatEvery is the consumer's heartbeat interval; 0 outside it.
	beatEvery time.Duration

	mu    sync.Mutex
	beats []func(context.Context) error
	// run is the consumer's record of the message while its handler runs:
	// the first OnHeartbeat then has it tick the message's functions (see
	// [Watcher]). Nil before and after, and outside the consumer.
	run Watcher
}

// Watcher is the consumer's record of a message whose handler runs. Both
// methods are called under the State's lock, which orders them: a
// function registered with [OnHeartbeat] as the handler returns is
// watched before, or not at all.
type Watcher interface {
	// Watch is called when the first function is registered with
	// OnHeartbeat while the handler runs: from then on the consumer ticks
	// the message's functions.
	Watch()
	// Unwatch is called by [EndRun] when any function was registered.
	Unwatch()
}

// state returns s: promoted to the types that embed a State, it makes them
// Carriers.
func (s *State) state() *State { return s }

// Carrier is a value that holds a State: a *sqsmsg.Message, or a *State.
type Carrier interface{ state() *State }

// Key returns the dedupe key set with [SetKey].
func Key(c Carrier) string { return c.state().key }

// SetKey sets the dedupe key. The caller falls back to the default key
// when key is "" (see sqsmsg.DefaultKey).
func SetKey(c Carrier, key string) { c.state().key = key }

// Wire returns the body SQS carried and true when the message's Body was
// replaced by the one its producer sent (read from S3 or decompressed).
func Wire(c Carrier) (string, bool) {
	s := c.state()
	return s.wire, s.decoded
}

// SetWire records the body SQS carried, before Body is replaced by the
// one its producer sent.
func SetWire(c Carrier, wire string) {
	s := c.state()
	s.wire, s.decoded = wire, true
}

// Object returns the S3 object the body is in; nil when it was in the
// message.
func Object(c Carrier) *payload.Pointer { return c.state().object }

// SetObject records the S3 object the body is in.
func SetObject(c Carrier, p *payload.Pointer) { c.state().object = p }

// DropObject reports whether the message's S3 object is deleted once the
// message is (an ack with PayloadConfig.DeleteAfterAck).
func DropObject(c Carrier) bool { return c.state().dropObject }

// SetDropObject has the message's S3 object deleted once the message is.
func SetDropObject(c Carrier) { c.state().dropObject = true }

// Unrun returns the receives in which the message did not run.
func Unrun(c Carrier) int { return c.state().unrun }

// SetUnrun sets the receives in which the message did not run.
func SetUnrun(c Carrier, n int) { c.state().unrun = n }

// BeatEvery returns the heartbeat interval that runs the OnHeartbeat
// functions; 0 when nothing runs them.
func BeatEvery(c Carrier) time.Duration { return c.state().beatEvery }

// SetBeatEvery sets the heartbeat interval.
func SetBeatEvery(c Carrier, d time.Duration) { c.state().beatEvery = d }

// OnHeartbeat registers fn; the first one calls Watch of the Watcher set
// by [StartRun], if any.
func OnHeartbeat(c Carrier, fn func(context.Context) error) {
	s := c.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beats = append(s.beats, fn)
	if len(s.beats) == 1 && s.run != nil {
		s.run.Watch()
	}
}

// Heartbeats returns the functions registered with [OnHeartbeat].
func Heartbeats(c Carrier) []func(context.Context) error {
	s := c.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]func(context.Context) error(nil), s.beats...)
}

// StartRun marks the message's handler as running in the consumer, whose
// record of it is w: the first function registered with [OnHeartbeat]
// from now on calls w.Watch.
func StartRun(c Carrier, w Watcher) {
	s := c.state()
	s.mu.Lock()
	s.run = w
	s.mu.Unlock()
}

// EndRun marks the handler as returned and, when a function was
// registered with [OnHeartbeat], calls Unwatch of the Watcher set by
// [StartRun].
func EndRun(c Carrier) {
	s := c.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.run
	s.run = nil
	if len(s.beats) > 0 && w != nil {
		w.Unwatch()
	}
}
