// Package consumer is sqsonce's SQS consumer: it long-polls a standard or
// FIFO queue, runs a Handler for each message with bounded concurrency,
// keeps in-flight messages invisible with a heartbeat, and settles each
// message in exactly one way: ack, retry with backoff, dead-letter,
// release, or, for a message received before its not-before time
// ([AttrNotBefore]), hold.
//
// A worker:
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		defer stop()
//		awsCfg, err := config.LoadDefaultConfig(ctx)
//		if err != nil {
//			log.Fatal(err)
//		}
//		zcfg := zap.NewProductionConfig()
//		zcfg.Sampling = nil // keep every line (see Config.Logger)
//		logger := zap.Must(zcfg.Build())
//		c, err := consumer.New(consumer.Config{
//			Client:      sqs.NewFromConfig(awsCfg),
//			QueueName:   "orders",
//			Concurrency: 32,
//			Logger:      logger,
//			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
//				var order Order
//				if err := json.Unmarshal([]byte(m.Body), &order); err != nil {
//					return consumer.Permanent(err) // straight to the DLQ
//				}
//				return ship(ctx, order) // an error is retried with backoff
//			}),
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		if err := c.Run(ctx); err != nil { // returns after SIGTERM and the drain
//			log.Fatal(err)
//		}
//	}
//
// The per-message path (key, middleware, panic recovery, classification)
// is the same in the Lambda adapter (package sqslambda) and in
// consumertest, which runs a handler through it without AWS. Errors map
// to outcomes as [Config.Classifier] says: your own Classifier decides
// the errors it knows, the consumer's classification (with Backoff and
// MaxAttempts) the rest.
//
// The message model (Message, Handler, Middleware, the errors and the
// outcomes) is package sqsmsg's, which the middleware and the Lambda
// adapter share without linking the consumer; every name is re-exported
// here, so consumer.Message is sqsmsg.Message.
package consumer
