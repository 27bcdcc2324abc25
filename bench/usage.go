package main

import (
	"runtime/metrics"
	"time"
)

// used is what a run used per message: this process's CPU (user and
// system, from the OS), and the part of it the Go runtime counts as
// garbage collection.
type used struct {
	cpu, gc time.Duration
}

// meter is a reading of the process's CPU and GC CPU so far.
type meter struct {
	cpu, gc time.Duration
}

// gcCPU names the runtime's estimate of the CPU spent on garbage
// collection: mark work (background, assists, idle Ps) and the
// stop-the-world pauses, counted as pause time × GOMAXPROCS.
const gcCPU = "/cpu/classes/gc/total:cpu-seconds"

func readMeter() meter {
	s := []metrics.Sample{{Name: gcCPU}}
	metrics.Read(s)
	var gc time.Duration
	if s[0].Value.Kind() == metrics.KindFloat64 {
		gc = time.Duration(s[0].Value.Float64() * float64(time.Second))
	}
	return meter{cpu: cpuTime(), gc: gc}
}

// perMessage is what was used since m, per message of n.
func (m meter) perMessage(n int) used {
	now := readMeter()
	d := time.Duration(max(n, 1))
	return used{cpu: (now.cpu - m.cpu) / d, gc: (now.gc - m.gc) / d}
}
