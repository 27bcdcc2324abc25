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
	// server is the local stack's fauxqs's CPU (every thread, from the
	// OS), when known (hasServer): see serverCPU.
	server    time.Duration
	hasServer bool
	// switches counts this process's voluntary context switches (see
	// osUsage), when known (hasSwitches); per message after perMessage.
	switches    float64
	hasSwitches bool
	// receives and deletes count the plain loop's ReceiveMessage and
	// DeleteMessageBatch calls (plainWorkLoop sets them; 0 elsewhere),
	// failed and empty ones included.
	receives, deletes int64
}

// serverCPU, when set (by the table's setup, from newServerCPU), reads
// the CPU the SQS server has used so far, so that a row can show what
// each side cost the server it shares the machine with.
var serverCPU func() (time.Duration, bool)

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
	cpu, switches, counted := osUsage()
	u := used{cpu: cpu, gc: gc}
	if counted {
		u.switches, u.hasSwitches = float64(switches), true
	}
	if serverCPU != nil {
		u.server, u.hasServer = serverCPU()
	}
	return u
}

// perMessage is what was used since the reading u, per message of n.
func (u used) perMessage(n int) used {
	now := readUsed()
	d := time.Duration(max(n, 1))
	per := used{cpu: (now.cpu - u.cpu) / d, gc: (now.gc - u.gc) / d}
	if u.hasSwitches && now.hasSwitches {
		per.switches, per.hasSwitches = (now.switches-u.switches)/float64(d), true
	}
	if u.hasServer && now.hasServer {
		per.server, per.hasServer = (now.server-u.server)/d, true
	}
	return per
}
