//go:build unix

package main

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSwitchesCountBlocking: a thread that blocks counts one voluntary
// context switch each time. A goroutine locked to its thread that sleeps
// parks that thread.
func TestSwitchesCountBlocking(t *testing.T) {
	_, before, ok := osUsage()
	if !ok {
		t.Fatal("getrusage gave no context switches")
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range 20 {
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	_, after, _ := osUsage()
	if after-before < 10 {
		t.Errorf("20 sleeps of a locked thread counted %d voluntary switches, want at least 10", after-before)
	}
}

// TestUsedSwitchesPerMessage: perMessage divides the switches since a
// reading by the messages, and the notes give them per 100 messages.
func TestUsedSwitchesPerMessage(t *testing.T) {
	u := readUsed()
	if !u.hasSwitches {
		t.Fatal("readUsed counted no switches")
	}
	u.switches -= 50 // as if 50 happened since
	per := u.perMessage(100)
	if !per.hasSwitches || per.switches < 0.5 {
		t.Errorf("perMessage: %v switches per message (counted %v), want at least 0.5", per.switches, per.hasSwitches)
	}
	s := appendSwitches(nil, used{switches: 0.25, hasSwitches: true})
	s = appendSwitches(s, used{switches: 9}) // not counted: left out
	if len(s) != 1 || s[0] != 25 {
		t.Errorf("appendSwitches: %v, want [25]", s)
	}
	note := switchNote(sample{25, 27, 26}, sample{18})
	if !strings.Contains(note, "sqsonce 26.0, plain loop 18.0") {
		t.Errorf("switchNote: %q", note)
	}
	if switchNote(nil, sample{18}) != "" {
		t.Error("switchNote gave a figure without sqsonce's")
	}
}
