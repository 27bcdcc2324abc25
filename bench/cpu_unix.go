//go:build unix

package main

import (
	"syscall"
	"time"
)

// osUsage reads, in one getrusage call, what the OS counted for this
// process so far:
//
//   - cpu, the CPU (user + system) it has used. A run's CPU per message is
//     far steadier than its rate on a machine whose two cores the emulator
//     shares.
//   - switches, how many times a thread of it gave up its CPU because it
//     blocked (on the network, a lock, or no work: the Go runtime parks an
//     idle thread): voluntary context switches. Each one is later a
//     wake-up, which costs the waker a system call and, on a virtual
//     machine, the sleeper's CPU an interrupt.
//
// counted is false when the call failed.
func osUsage() (cpu time.Duration, switches int64, counted bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw), true
}
