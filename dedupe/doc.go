// Package dedupe turns SQS's at-least-once delivery into at-most-once
// handler runs per message key: a [Store] records each key as IN_PROGRESS
// (claimed under a lease) or COMPLETED, and the [Middleware] ([New])
// claims the key before the handler, completes it after a success and
// releases it after a failure.
//
// Each message's key is [consumer.Message.Key] (the sqsonce-id attribute,
// else the SQS MessageId); stores prefix it with a namespace, one per
// consumer, so two queues fed the same ids (an SNS fan-out) dedupe
// separately. A record lives [DefaultTTL] (30 days) so every redelivery,
// DLQ replay and redrive of a message still finds it.
//
//	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "orders"})
//	mw, err := dedupe.New(dedupe.Config{Store: store, Lease: time.Minute})
//	if err != nil { ... }
//	handler := consumer.Chain(consumer.HandlerFunc(handle), mw.Wrap)
//
// [Memory] keeps records in process (tests, single-process use); the
// DynamoDB and PostgreSQL stores (packages dedupedynamo and dedupepg) keep
// them durably and add a transactional mode, where the handler's own
// writes commit in one transaction with the COMPLETED record.
//
// What the lease-based middleware guarantees: a handler never runs
// concurrently with itself for one key, and never again after a success
// was recorded. It cannot make an external side effect (an email, an HTTP
// call) exactly-once: if the worker dies after the effect and before
// Complete, the lease ends and the message runs again. Pass the key
// downstream as an idempotency key, or use transactional mode for effects
// in DynamoDB.
package dedupe
