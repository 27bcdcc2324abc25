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
