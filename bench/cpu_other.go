//go:build !unix

package main

import "time"

// cpuTime is unknown here: the CPU-per-message row shows "-".
func cpuTime() time.Duration { return 0 }

// switches is unknown here: the notes leave the figure out.
func switches() (int64, bool) { return 0, false }
