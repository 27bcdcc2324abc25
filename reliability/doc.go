// Package reliability holds sqsonce's reliability suite: scenarios that
// attack the ledger example (crashes, injected faults, slow handlers,
// shutdown under load, bad input, redrive under crash, relays killed while
// the API's credits flow through the outbox, credits charged at a bank
// that drops answers and charges twice, with workers killed mid-charge)
// on the local stack and then check the promise of docs/architecture.md
// (docs/development.md describes the suite): the total applied equals the
// sum over distinct valid
// credits, no credit was applied twice, the source queue is empty, and the
// DLQ holds every malformed message and nothing else. Each scenario also
// checks that its attack happened: that crashes hit in-flight work, that
// faults were injected, that SIGTERM came with at least 100 messages in
// flight, that the bad input reached the consumer, that sqs-redrive was
// killed mid-move, that workers were killed mid-charge; TestExternalEffects
// also checks the bank's own list of charges: every credit charged exactly
// once. The crash and fault scenarios run on both of the ledger's stores
// (-store dynamodb and -store postgres: TestCrashes/postgres,
// TestFaults/postgres, TestRelayCrashes/postgres,
// TestExternalEffects/postgres); on PostgreSQL the faults
// are the SQS proxy's plus the workers' backends ended again and again
// with pg_terminate_backend, inside transactions too.
//
// `make test` runs a short version; `make test-reliability` runs the full
// one (SQSONCE_RELIABILITY=full) and prints, per scenario, messages
// processed, faults injected, crashes, and the invariant check:
//
//	make test-reliability
package reliability
