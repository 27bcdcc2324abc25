//go:build !race

package telemetry_test

// raceAllocs: see race_test.go.
const raceAllocs = 0
