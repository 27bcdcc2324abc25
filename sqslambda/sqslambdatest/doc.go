// Package sqslambdatest tests a Lambda function's batch behaviour by
// acting as its SQS event source mapping (with ReportBatchItemFailures
// on) against a real queue: the local stack's, or an in-process fake.
// Where consumer/consumertest runs one message through a handler, a
// [Mapping] runs whole batches through the function, as Lambda would:
//
//   - it receives up to BatchSize messages with the queue's visibility
//     timeout and builds the event Lambda builds ([Event]);
//   - it invokes the function (the Handle method of an *sqslambda.Handler)
//     under a context that ends at the function's timeout;
//   - it applies the partial batch response: the successes are deleted,
//     the batchItemFailures are left to come back when their visibility
//     ends; a returned error, a panic, a timeout or an invalid
//     itemIdentifier fails the whole batch;
//   - it returns a [Result] to assert on: the records invoked, failed and
//     deleted, and, on a FIFO queue, any record deleted after an earlier
//     failure of its message group.
//
// So a test sees, end to end, what sqslambda promises: transient failures
// reported and redelivered, permanent failures sent to the dead-letter
// queue by sqsonce and reported as successes, a FIFO group stopped at its
// first failure. [Mapping.Drain] polls until the queue stays empty.
//
//	func TestFunction(t *testing.T) {
//		ctx := context.Background()
//		h, err := sqslambda.New(sqslambda.Config{Client: sqsClient, Handler: handler})
//		if err != nil {
//			t.Fatal(err)
//		}
//		esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{
//			Client: sqsClient, QueueURL: queueURL, HandleFunc: h.Handle,
//		})
//		if err != nil {
//			t.Fatal(err)
//		}
//		results, err := esm.Drain(ctx)
//		if err != nil {
//			t.Fatal(err)
//		}
//		for _, r := range results {
//			if r.Err != nil {
//				t.Errorf("batch %v failed whole: %v", r.Invoked, r.Err)
//			}
//		}
//	}
//
// To run the built function itself, under AWS's Lambda Runtime Interface
// Emulator, give HandleFunc a function that posts the event to the
// emulator and decodes its answer: examples/lambda shows how.
package sqslambdatest
