//go:build !unix

package main

import "time"

// osUsage is unknown here: the CPU-per-message row shows "-", and the
// notes leave the context switches out.
func osUsage() (cpu time.Duration, switches int64, counted bool) { return 0, 0, false }
