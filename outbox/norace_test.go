//go:build !race

package outbox_test

// raceEnabled: see race_test.go.
const raceEnabled = false
