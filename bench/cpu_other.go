//go:build !unix

package main

import "time"

// cpuTime is unknown here: the CPU-per-message row shows "-".
func cpuTime() time.Duration { return 0 }
