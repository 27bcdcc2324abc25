package main

import (
	"runtime/metrics"
	"time"
)

// used is CPU time: this process's (user and system, from the OS), and the
// part of it the Go runtime counts as garbage collection. readUsed gives
// the totals so far; perMessage turns one such reading into a run's
// figures per message.
type used struct {
	cpu, gc time.Duration
}

// gcCPU names the runtime's estimate of the CPU spent on garbage
// collection: mark work (background, assists, idle Ps) and the
// stop-the-world pauses, counted as pause time × GOMAXPROCS.
const gcCPU = "/cpu/classes/gc/total:cpu-seconds"

func readUsed() used {
	s := []metrics.Sample{{Name: gcCPU}}
	metrics.Read(s)
	var gc time.Duration
	if s[0].Value.Kind() == metrics.KindFloat64 {
		gc = time.Duration(s[0].Value.Float64() * float64(time.Second))
	}
	return used{cpu: cpuTime(), gc: gc}
}

// perMessage is what was used since the reading u, per message of n.
func (u used) perMessage(n int) used {
	now := readUsed()
	d := time.Duration(max(n, 1))
	return used{cpu: (now.cpu - u.cpu) / d, gc: (now.gc - u.gc) / d}
}
