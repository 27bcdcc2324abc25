// Package redrive moves messages out of SQS dead-letter queues safely: it
// lists DLQs and their sources, peeks at dead letters, plans (dry run),
// moves with filters, a cap and a rate limit, exports to and imports from
// JSON lines, and drives SQS's native message move tasks.
//
// A move sends each batch to the destination first and deletes a message
// from the DLQ only after its own send succeeded, so a crash leaves a
// duplicate, never a loss; the sqsonce-id attribute travels with the
// message so that the consumer's dedupe drops that duplicate.
//
//	r, err := redrive.New(redrive.Config{Client: sqs.NewFromConfig(cfg)})
//	if err != nil { ... }
//	dlq, err := r.Queue(ctx, "orders-dlq")
//	if err != nil { ... }
//	only, _ := redrive.ParseFilters("class=permanent", "error~timeout")
//	sum, err := r.Move(ctx, dlq, redrive.MoveOptions{Filters: only, Rate: 50})
//	fmt.Println(sum.Moved, sum.Skipped, sum.Failed)
package redrive
