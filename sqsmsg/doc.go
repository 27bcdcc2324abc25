// Package sqsmsg is the message model that sqsonce's packages share: the
// received [Message], the [Handler] that runs it and the [Middleware]
// around it, the errors a handler returns to say how the message ends
// ([Permanent], [RetryAfter], [ErrDuplicate]), and the [Outcome] a
// [Classifier] maps an error to.
//
// It imports nothing of sqsonce's runtimes: the dedupe and envelope
// middleware, the redrive tool and the Lambda adapter build on it
// without linking the long-poll consumer. Package consumer re-exports
// every name under the same name (consumer.Message is sqsmsg.Message),
// so code can use either.
//
//	var h sqsmsg.Handler = sqsmsg.HandlerFunc(func(ctx context.Context, m *sqsmsg.Message) error {
//		var order Order
//		if err := json.Unmarshal([]byte(m.Body), &order); err != nil {
//			return sqsmsg.Permanent(err) // straight to the DLQ
//		}
//		return ship(ctx, order) // an error is retried with backoff
//	})
package sqsmsg
