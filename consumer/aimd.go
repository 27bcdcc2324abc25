package consumer

import (
	"time"
)

// aimd is the rate of [Adaptive]: cut by Decrease when the downstream
// asks to slow down, at most once per aimdHold, grown by Increase a
// second since, up to the configured rate. It measures the rate at which
// messages started over the last second, the base of a cut when lower
// than the rate allowed (a consumer held back by its handlers, or by the
// fleet's rate, would otherwise cut a rate it never reached). Not safe
// for concurrent use: the limiter locks it.
type aimd struct {
	ceiling, floor     float64
	decrease, increase float64

	cur     float64
	at      time.Time // cur is the rate as of at
	lastCut time.Time

	// Starts counted in the current window (from winStart) and the rate
	// of the last whole window.
	winStart time.Time
	winCount int
	achieved float64 // 0: not measured yet
}

// aimdHold is the shortest time between two cuts: the messages in flight
// when the downstream first asked to slow down bring the same news.
const aimdHold = time.Second

// aimdWindow is the span over which the rate achieved is measured.
const aimdWindow = time.Second

func newAIMD(rate float64, a Adaptive, now time.Time) *aimd {
	return &aimd{ceiling: rate, floor: a.Min, decrease: a.Decrease, increase: a.Increase, cur: rate, at: now, winStart: now}
}

// rate returns the rate at now: cur grown by Increase a second since it
// was set, up to the ceiling.
func (a *aimd) rate(now time.Time) float64 {
	if d := now.Sub(a.at); d > 0 {
		a.cur = min(a.ceiling, a.cur+a.increase*d.Seconds())
		a.at = now
	}
	return a.cur
}

// started counts a start at now.
func (a *aimd) started(now time.Time) {
	if d := now.Sub(a.winStart); d >= aimdWindow {
		if d < 2*aimdWindow {
			a.achieved = float64(a.winCount) / d.Seconds()
		} else {
			a.achieved = 0 // idle since: nothing measured
		}
		a.winStart, a.winCount = now, 0
	}
	a.winCount++
}

// slowDown cuts the rate at now, unless it was cut within aimdHold; it
// reports the rate before and after, and whether it cut.
func (a *aimd) slowDown(now time.Time) (from, to float64, cut bool) {
	from = a.rate(now)
	if !a.lastCut.IsZero() && now.Sub(a.lastCut) < aimdHold {
		return from, from, false
	}
	base := from
	if a.achieved > 0 && a.achieved < base {
		base = a.achieved
	}
	a.cur = max(a.floor, base*a.decrease)
	a.at, a.lastCut = now, now
	return from, a.cur, true
}
