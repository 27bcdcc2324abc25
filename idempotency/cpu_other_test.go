//go:build !unix

package idempotency_test

// cpuTime is not measured here; the benchmark reports no cpu-ns/op.
func cpuTime() int64 { return 0 }
