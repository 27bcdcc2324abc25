package dynamo

// SetTestHook installs fn as the transactional commit hook for a test.
func SetTestHook(fn func(point, key string)) { testHook = fn }
