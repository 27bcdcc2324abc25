package dedupedynamo

import "github.com/sqsonce/sqsonce/consumer"

// SetTestHook installs fn as the commit hook of h, a handler made by
// Transactional.
func SetTestHook(h consumer.Handler, fn func(point, key string)) { h.(*txHandler).testHook = fn }
