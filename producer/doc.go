// Package producer is the sending side of sqsonce: it stamps every message
// with a stable sqsonce-id, so that consumers dedupe on it, sends in
// SendMessageBatch calls within SQS's limits (or publishes to an SNS
// topic within SNS's), retries the entries that failed, and creates
// queues with their dead-letter queues.
//
//	q, err := producer.CreateQueue(ctx, client, producer.QueueConfig{Name: "orders"})
//	p, err := producer.New(producer.Config{Client: client, QueueURL: q.URL})
//	// The id is the job's identity: made when the job is made, kept on re-sends.
//	res, err := p.Send(ctx, producer.Message{ID: order.ID, Body: string(body)})
//
// A producer that sends the same job twice (a retry after a timeout, a
// re-run of a script) sends it with the same id, and the consumer's dedupe
// middleware applies it once. On a FIFO queue the id is also the
// MessageDeduplicationId, so SQS itself drops a re-send within 5 minutes.
//
// A message SQS would refuse (over the queue's MaximumMessageSize, which
// the producer reads once, or with characters or a group id SQS refuses)
// is refused before sending, and one SQS refuses as the sender's fault is
// not retried: both match [ErrInvalid].
//
// # SNS
//
// A [Publisher] does the same for an SNS topic, with Publish and
// PublishBatch calls:
//
//	pub, err := producer.NewPublisher(producer.PublisherConfig{Client: snsClient, TopicARN: topicARN})
//	res, err := pub.Publish(ctx, producer.Publication{ID: order.ID, Body: string(body)})
//
// SNS gives every publication a new MessageId, a retried one included, so
// a consumer that keys an SNS-fed message by its MessageId (the envelope
// package's fallback) handles a job published twice twice. The
// Publisher's sqsonce-id is a message attribute: with raw message
// delivery it reaches the queue as an SQS message attribute, without it
// is in the envelope's MessageAttributes, and the consumer (with
// envelope.Unwrap) keys the message by it either way. On a FIFO topic it
// is also the MessageDeduplicationId, and GroupID is required.
//
// What it cannot do: a message whose every attempt failed is returned as
// failed, not kept; a process that must not lose events it has committed
// elsewhere writes them to the outbox in the same transaction instead.
package producer
