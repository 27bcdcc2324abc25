//go:build !race

package idempotency_test

const raceEnabled = false
