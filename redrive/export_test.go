package redrive

// Unexported names the external tests (fuzz_test.go) reach.
var ParseQueueARN = parseQueueARN
