//go:build unix

package idempotency_test

import "syscall"

// cpuTime is the process's user plus system CPU time in ns: the
// benchmark's figure that waiting for a busy machine's cores does not
// inflate.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
