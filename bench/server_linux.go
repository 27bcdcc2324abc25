//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// newServerCPU returns a reader of the CPU (user and system, every thread)
// the local stack's fauxqs has used so far, from /proc; nil, with why not,
// when there is no such process (another SQS endpoint, or no PID file in
// SQSONCE_STACK_DIR, default .stack). The OS counts it in clock ticks
// (10 ms), so it is read only over runs long enough for that to be fine.
func newServerCPU() (read func() (time.Duration, bool), why string) {
	pid, err := stackPID(stackDir(), "fauxqs", "fauxqs")
	if err != nil {
		return nil, err.Error()
	}
	path := fmt.Sprintf("/proc/%d/stat", pid)
	read = func() (time.Duration, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		return procCPU(string(b))
	}
	if _, ok := read(); !ok {
		return nil, "cannot read fauxqs's CPU from " + path
	}
	return read, ""
}

// clockTick is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go runs on.
const clockTick = 10 * time.Millisecond

// procCPU is utime + stime from the text of /proc/PID/stat. The process
// name, the second field, is in parentheses and may hold spaces and
// parentheses itself: the fields after it start after the last ')'.
func procCPU(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	// After the name: state (field 3) ... utime (14), stime (15).
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}
