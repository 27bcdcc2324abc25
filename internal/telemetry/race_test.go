//go:build race

package telemetry_test

// raceAllocs is the allocations the race detector adds to a sampled
// message's path (the SDK's, and a sync.Pool's, which drops what it is
// given at random under -race): the bounds of TestMessageAllocations
// allow for them under -race.
const raceAllocs = 3
