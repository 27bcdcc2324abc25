// Package heartbeat keeps SQS messages invisible while your own code works
// on them: for a receive loop of your own (the raw SDK, another framework,
// a batch job) that does not use package consumer.
//
// A [Keeper] per queue extends every receipt handle it holds shortly before
// its visibility runs out, in ChangeMessageVisibilityBatch calls of up to
// 10 handles, and never past SQS's limit of 12 hours from the receive. A
// handle it can no longer keep (the 12 hours are up, the visibility ran
// out before an extension succeeded, or SQS refused the extension) is
// reported on the channel [Keeper.Add] returned for it.
//
//	keeper, err := heartbeat.New(heartbeat.Config{
//		Client:     sqsClient,
//		QueueURL:   queueURL,
//		Visibility: 30 * time.Second, // the queue's visibility timeout
//	})
//	if err != nil {
//		return err
//	}
//	go keeper.Run(ctx) // until ctx is cancelled
//
//	out, err := sqsClient.ReceiveMessage(ctx, in)
//	// ...
//	for _, m := range out.Messages {
//		lost := keeper.Add(*m.ReceiptHandle, time.Now())
//		err := work(ctx, m, lost) // stop early on a value from lost
//		keeper.Remove(*m.ReceiptHandle) // before the delete
//		// ... DeleteMessage when err is nil ...
//	}
//
// Add every handle as soon as the receive returns it, also those that wait
// for their turn, and Remove it before deleting the message or changing its
// visibility. Package consumer keeps its messages invisible the same way.
package heartbeat
