package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sqsonce/sqsonce/redrive"
)

// isTerminal reports whether v is a file open on a terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && terminal(f)
}

// bar shows progress on stderr: a redrawn bar on a terminal, a plain line
// every few seconds otherwise.
type bar struct {
	w     io.Writer
	tty   bool
	verb  string
	last  time.Time
	drawn bool
	every time.Duration
	hook  func(redrive.Progress)
}

func (a *app) newBar(verb string) *bar {
	return &bar{w: a.stderr, tty: isTerminal(a.stderr), verb: verb, last: time.Now(), every: 2 * time.Second, hook: a.progressHook}
}

// update reports progress.
func (b *bar) update(p redrive.Progress) {
	if b.hook != nil {
		b.hook(p)
	}
	now := time.Now()
	if b.tty {
		if now.Sub(b.last) < 100*time.Millisecond && b.drawn {
			return
		}
		b.last, b.drawn = now, true
		const width = 30
		done := p.Moved + p.Skipped + p.Failed
		fill := 0
		if p.Total > 0 {
			fill = min(width, done*width/p.Total)
		}
		fmt.Fprintf(b.w, "\r%s [%s%s] %d/%d  moved %d  skipped %d  failed %d  %s ", b.verb,
			strings.Repeat("#", fill), strings.Repeat(" ", width-fill), done, p.Total, p.Moved, p.Skipped, p.Failed, p.Elapsed.Round(time.Second))
		return
	}
	if now.Sub(b.last) < b.every {
		return
	}
	b.last = now
	fmt.Fprintf(b.w, "%s: received %d, moved %d, skipped %d, failed %d (%s)\n", b.verb, p.Received, p.Moved, p.Skipped, p.Failed, p.Elapsed.Round(time.Second))
}

// done ends the bar's line.
func (b *bar) done() {
	if b.tty && b.drawn {
		fmt.Fprintln(b.w)
	}
}
