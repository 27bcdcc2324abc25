package redrive

import "github.com/sqsonce/sqsonce/sqsmsg"

// selector decides, message by message, what a move or an export takes
// from a DLQ and what it leaves there, and keeps the FIFO rule in one
// place: once a message of a group is left behind, every later message of
// that group is left too (taking them would reorder the group).
type selector struct {
	p       *pass
	fifo    bool
	filters []Filter
	max     int
	sum     *Summary
	blocked map[string]bool // FIFO groups held back for the rest of the pass
}

func newSelector(p *pass, fifo bool, filters []Filter, max int, sum *Summary) *selector {
	return &selector{p: p, fifo: fifo, filters: filters, max: max, sum: sum, blocked: map[string]bool{}}
}

// groupBlocked reports a FIFO message whose group is held back; such a
// message is held and counted skipped and blocked.
func (s *selector) groupBlocked(m *sqsmsg.Message) bool {
	if !s.fifo || !s.blocked[m.GroupID] {
		return false
	}
	s.sum.Skipped++
	s.sum.Blocked++
	s.p.hold(m)
	return true
}

// selected reports whether e passes the filters and is within Max.
func (s *selector) selected(e Entry) bool {
	return matchAll(s.filters, e) && (s.max <= 0 || s.sum.Matched < s.max)
}

// leave holds m back until the end of the pass and, on FIFO, blocks the
// rest of its group. The caller counts why.
func (s *selector) leave(m *sqsmsg.Message) {
	s.p.hold(m)
	if s.fifo {
		s.blocked[m.GroupID] = true
	}
}

// blockedGroups returns how many FIFO groups were held back.
func (s *selector) blockedGroups() int { return len(s.blocked) }
