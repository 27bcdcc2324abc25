// Package sqsfake is an in-process SQS for tests, following the semantics
// AWS documents rather than those of a local emulator:
//
//   - One Fake holds many queues (CreateQueue, GetQueueUrl,
//     Get/SetQueueAttributes, ListQueues, DeleteQueue, PurgeQueue,
//     ListDeadLetterSourceQueues) with URLs like
//     https://sqs.us-east-1.amazonaws.com/123456789012/name and the
//     documented defaults (VisibilityTimeout 30, MaximumMessageSize 1 MiB).
//   - A FIFO receive returns several messages of one group, in order; a
//     group is locked while any of its messages is in flight; sends need a
//     MessageGroupId and a deduplication id (or ContentBasedDeduplication)
//     and a duplicate within 5 minutes succeeds with the original
//     MessageId without being enqueued. A receive retried with the same
//     ReceiveRequestAttemptId within 5 minutes, while none of its messages
//     was deleted or had its visibility changed, returns the same messages
//     with the same receipt handles.
//   - Each receive issues a new receipt handle. Deleting with a handle from
//     an earlier receive succeeds without deleting the message (as SQS
//     documents); changing visibility with one is ReceiptHandleIsInvalid;
//     changing it after the visibility ended is MessageNotInflight; a
//     timeout beyond 43200 seconds, or ending more than 12 hours after the
//     receive, is InvalidParameterValue.
//   - A RedrivePolicy moves a message received maxReceiveCount times to the
//     dead-letter queue on the next receive that would return it, keeping its
//     id, body and attributes, and stamping it with the system attribute
//     DeadLetterQueueSourceArn (the queue it came from), as SQS does. StartMessageMoveTask moves a DLQ's visible
//     messages back (or to DestinationArn) within the call, so its tasks are
//     COMPLETED when listed.
//   - Errors are the SDK's typed errors (types.QueueDoesNotExist,
//     types.ReceiptHandleIsInvalid, types.TooManyEntriesInBatchRequest, ...)
//     or a smithy.GenericAPIError with SQS's code where there is no type,
//     wrapped in a smithy.OperationError as the client does. Batch entry
//     failures carry the same codes.
//
// The clock is time.Now and every wait (long poll, injected delays) happens
// inside the call with timers and channels, so the fake works inside
// testing/synctest bubbles; no goroutine outlives a call.
//
// Faults are injected per Fake with Inject (or FailNext); Calls, Messages,
// Sent, VisibilityLog and Problems are for assertions.
//
//	f := sqsfake.New()
//	dlq := f.AddQueue("orders-dlq.fifo", nil)
//	q := f.AddQueue("orders.fifo", map[string]string{
//		"FifoQueue":     "true",
//		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq.fifo","maxReceiveCount":"5"}`,
//	})
//	f.Put(q, `{"order":1}`, "customer-7")
//	f.Inject(func(op string, in any) sqsfake.Fault {
//		if op == "DeleteMessageBatch" {
//			return sqsfake.Fault{LoseResponse: true} // applied, but the caller sees an error
//		}
//		return sqsfake.Fault{}
//	})
//	// ... run the code under test with f as its SQS client ...
//	if p := f.Problems(); len(p) > 0 {
//		t.Errorf("SQS contract violations: %v", p)
//	}
//	_ = f.Sent(dlq)
package sqsfake
