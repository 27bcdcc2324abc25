package settle

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// Unrun counts, per message id, the receives that were not attempts: a
// FIFO message received behind an earlier message of its group that was
// then retried or released (see [Behind]), or released at shutdown,
// did not run; a message whose handler found its downstream unavailable
// ([Unavailable]) ran, but its failure says nothing of the message. SQS
// counts each of them in ApproximateReceiveCount all the same; a
// message's attempts are its receive count less its Unrun count, so that
// one that waited behind a failing message, or through a downstream's
// outage, is not dead-lettered for attempts it never had.
//
// The count is only what this process saw. A message put back by one
// process and received next by another, or after a restart, or whose
// entry was dropped (see below), counts those receives as attempts, as
// SQS does: the count errs towards more attempts, never fewer, so it
// never keeps a message alive past the attempts it really had.
//
// Entries live while a message is away: Set when it is put back, read
// when it is received again, forgotten when it is deleted. So that
// messages that never come back (another process took them) do not
// accumulate, entries are kept in two generations: a new one starts when
// the current one holds maxUnrunEntries, or is 12 hours old (a message
// put back comes back within SQS's 12 hours of visibility), and the one
// before it is dropped. The zero Unrun is ready to use; a nil *Unrun
// counts nothing.
type Unrun struct {
	mu       sync.Mutex
	cur, old map[string]int
	started  time.Time // of cur
	// n is len(cur)+len(old): a receive looks a message up only when it
	// is not 0, without taking mu.
	n atomic.Int64
}

// maxUnrunEntries bounds each generation of an [Unrun]: about a
// megabyte at most for the two.
const maxUnrunEntries = 8192

// unrunAge is how long a generation of an [Unrun] takes entries.
const unrunAge = sqslimits.MaxVisibility

// Count returns the receives in which the message with the given id is
// known not to have run.
func (u *Unrun) Count(id string) int {
	if u == nil || u.n.Load() == 0 {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if n, ok := u.cur[id]; ok {
		return n
	}
	return u.old[id]
}

// Set records that the message with the given id did not run in n of its
// receives (n > 0), at now.
func (u *Unrun) Set(id string, n int, now time.Time) {
	if u == nil || n <= 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cur == nil || len(u.cur) >= maxUnrunEntries || now.Sub(u.started) >= unrunAge {
		u.old, u.cur, u.started = u.cur, make(map[string]int), now
	}
	delete(u.old, id)
	u.cur[id] = n
	u.n.Store(int64(len(u.cur) + len(u.old)))
}

// Forget drops the entry of the message with the given id: it was
// deleted.
func (u *Unrun) Forget(id string) {
	if u == nil || u.n.Load() == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.cur, id)
	delete(u.old, id)
	u.n.Store(int64(len(u.cur) + len(u.old)))
}
