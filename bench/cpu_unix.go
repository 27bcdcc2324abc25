//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTime is the CPU (user + system) this process has used so far. A run's
// CPU per message is far steadier than its rate on a machine whose two
// cores the emulator shares.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// switches is how many times so far a thread of this process gave up its
// CPU because it blocked (on the network, a lock, or no work: the Go
// runtime parks an idle thread): voluntary context switches. Each one is
// later a wake-up, which costs the waker a system call and, on a virtual
// machine, the sleeper's CPU an interrupt. false where the OS does not
// count them.
func switches() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return int64(ru.Nvcsw), true
}
