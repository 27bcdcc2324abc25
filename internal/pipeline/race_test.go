//go:build race

package pipeline

// raceEnabled: the race detector is on (TestProcessAllocations skips).
const raceEnabled = true
