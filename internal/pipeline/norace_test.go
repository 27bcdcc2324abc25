//go:build !race

package pipeline

// raceEnabled: see race_test.go.
const raceEnabled = false
