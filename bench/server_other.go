//go:build !linux

package main

import "time"

// newServerCPU reads /proc, so it is Linux only.
func newServerCPU() (read func() (time.Duration, bool), why string) {
	return nil, "the server's CPU is read from /proc, on Linux only"
}
