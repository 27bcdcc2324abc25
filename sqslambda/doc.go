// Package sqslambda runs a sqsonce Handler behind an AWS Lambda SQS event
// source mapping. The same handler, middleware (dedupe included),
// classifier and key function serve the long-poll consumer and Lambda;
// the adapter settles each record the way the consumer would, reporting
// what must come back as batchItemFailures (turn on
// ReportBatchItemFailures in the event source mapping):
//
//   - ack and duplicate: success, Lambda deletes the message;
//   - transient failure: failure, and the message's visibility is set to
//     the backoff (or RetryAfter) delay, so retries back off in Lambda too;
//   - permanent failure: sent by sqsonce to the dead-letter queue (from
//     Config or the queue's RedrivePolicy) with its sqsonce-failure
//     attribute, then success; a failed send is a failure, never a loss;
//   - FIFO: a message group's records run one at a time in order; once one
//     is retried or released, the group's later records are reported as
//     failures without running (behind a retry, kept invisible for its
//     delay), other groups go on;
//   - a record received before its not-before time (producer's
//     Message.NotBefore): not run but held as the consumer holds it, a
//     failure with its visibility set to the time left, or a fresh
//     delayed copy sent and success.
//
// The handlers' context ends DeadlineMargin before the invocation's
// deadline, so a dedupe lease (capped at the context's deadline) never
// outlives the invocation, and there is time left to settle. While records
// run, a heartbeat keeps the batch's messages invisible. Set the dedupe
// Lease to the function timeout: the lease then covers the whole
// invocation.
//
//	func main() {
//		cfg, _ := config.LoadDefaultConfig(context.Background())
//		store, _ := dedupedynamo.New(dedupedynamo.Config{Client: dynamodb.NewFromConfig(cfg), Namespace: "orders"})
//		dd, _ := dedupe.New(dedupe.Config{Store: store, Lease: 15 * time.Minute})
//		h, err := sqslambda.New(sqslambda.Config{
//			Client:     sqs.NewFromConfig(cfg),
//			Handler:    consumer.HandlerFunc(handleOrder),
//			Middleware: []consumer.Middleware{dd.Wrap},
//			QueueURL:   os.Getenv("QUEUE_URL"), // optional: lets Check run before the first event
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		_ = h.Check(context.Background()) // warns when visibility < 6 × function timeout
//		lambda.Start(h.Handle)
//	}
package sqslambda
