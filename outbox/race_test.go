//go:build race

package outbox_test

// raceEnabled: the race detector is on (TestRelayStepAllocations skips).
const raceEnabled = true
