// Package consumer is sqsonce's SQS consumer: it long-polls a standard or
// FIFO queue, runs a Handler for each message with bounded concurrency,
// keeps in-flight messages invisible with a heartbeat, and settles each
// message in exactly one way: ack, retry with backoff, dead-letter, or
// release.
package consumer
