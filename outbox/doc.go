// Package outbox publishes events to SQS exactly when the change they
// describe commits: the transactional outbox.
//
// A service that changes its data and then sends a message either loses
// the message (a crash between the two) or sends one for a change that
// rolled back. With an outbox it writes the event in the same transaction
// as the change; a [Relay] publishes committed events to SQS afterwards.
//
//	st, _ := outboxdynamo.New(outboxdynamo.Config{Client: ddb, Table: "orders-outbox"})
//	err := st.Commit(ctx, func() ([]types.TransactWriteItem, error) {
//		evs, err := st.Put(outbox.Event{Entity: order.ID, Type: "order.placed", Payload: body})
//		return append([]types.TransactWriteItem{putOrder}, evs...), err
//	})
//	// elsewhere, as many as you like:
//	relay, _ := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: sqsClient, QueueURL: url})
//	go relay.Run(ctx)
//
// What it guarantees: an event is published if and only if its
// transaction committed; events of one entity are published in the order
// their transactions committed, also with several relays running (each
// entity belongs to one partition, each partition to one relay at a time,
// under a lease); every message carries the event id as sqsonce-id (and as
// the FIFO MessageDeduplicationId, with the entity as MessageGroupId), so a
// consumer with dedupe applies it once.
//
// What it cannot do: publish exactly once. A relay that crashes between
// the send and the removal of the event publishes it again; a relay that
// stalls past its lease may publish an event that its successor has also
// published. Consumers dedupe on sqsonce-id, which is why those copies are
// harmless. An event whose sends keep failing is parked after MaxAttempts,
// and one SQS can never take as it is at its first failure (see [Stats]);
// its entity's later events wait behind it, other entities carry on, until
// an operator sends it again ([Store.Requeue]), fixes its payload
// ([Store.Edit]) or drops it ([Store.Discard]).
//
// The record layouts are in docs/architecture.md.
package outbox
