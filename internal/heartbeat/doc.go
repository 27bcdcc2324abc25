// Package heartbeat keeps a set of SQS receipt handles invisible: one
// ticker per consumer extends every handle that is about to run out, with
// ChangeMessageVisibilityBatch in chunks of 10, and never past SQS's
// 12-hour limit from the receive. It knows nothing of handlers: a handle
// whose extension is refused (receipt handle invalid, message not in
// flight) or that reaches the limit is reported to the callback given to
// Add.
//
//	hb, err := heartbeat.New(heartbeat.Config{
//		Client:     sqsClient,
//		QueueURL:   queueURL,
//		Visibility: 30 * time.Second, // the queue's visibility timeout
//	})
//	if err != nil {
//		return err
//	}
//	go hb.Run(ctx)
//	// The visibility counts from the response, SQS's 12 hours from the call.
//	hb.AddReceived(handle, receiveCalledAt, receiveReturnedAt, func(err error) { cancelHandler(err) })
//	// ... handle the message; then, before deleting it:
//	hb.Remove(handle) // returns at once
//	// or, before changing its visibility instead:
//	<-hb.Detach(handle) // once no extension of it is in flight
package heartbeat
