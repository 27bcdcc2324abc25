// Package outboxpg is the PostgreSQL outbox: [Store.Put] writes events in
// the caller's pgx.Tx, with the change they describe, and the [Store] is
// what an [outbox.Relay] reads.
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, id, amount); err != nil {
//			return err
//		}
//		return store.Put(ctx, tx, outbox.Event{Entity: id, Type: "credited", Payload: body})
//	})
//
//	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: sqsClient, QueueURL: url})
//	go relay.Run(ctx)
//
// # Tables
//
// pgstore.Migrate with pgstore.Outbox creates them (with the other sqsonce
// tables an application uses, in one call), recorded in
// sqsonce_schema_migrations; it is never run implicitly. In the
// connection's schema:
//
//	sqsonce_outbox_entities  entity_key PK, seq            each entity's last sequence number
//	sqsonce_outbox           (entity_key, seq) PK, id, entity, partition, type, payload,
//	                         created_at, attempts, last_error, next_at, dead, trace (jsonb),
//	                         not_before
//	                         index (partition, entity_key, seq); partial index on created_at WHERE dead
//	sqsonce_outbox_leases    partition PK, owner, until    partitions held by relays
//	sqsonce_outbox_relays    owner PK, until               live relays
//
// # Commit order with several writers and relays
//
// Sequence numbers handed out at insert time do not follow commit order (a
// transaction that inserts first may commit last), and FOR UPDATE SKIP
// LOCKED alone lets two relays publish one entity's events out of order.
// So Put bumps the entity's row in sqsonce_outbox_entities (INSERT ... ON
// CONFLICT DO UPDATE SET seq = seq + n RETURNING seq) in the writer's
// transaction: the row stays locked until that transaction ends, a second
// writer of the entity waits for it, and each entity's sequence numbers
// rise in commit order. An uncommitted event is invisible to the relay and
// no later event of its entity can exist yet, so an event that commits
// late is simply its entity's next one: there is no watermark to skip it.
//
// Entities hash to partitions (Config.Partitions, 16 by default), leased
// to relays as in the DynamoDB outbox (docs/architecture.md): each relay
// registers, holds at most its share of the partitions under a lease it
// renews every third of Config.Lease, and gives up the rest. A relay reads
// each entity's ready run in its partitions ([Store.DueRuns]: its oldest
// events in sequence order, up to the first that is dead or waiting for a
// retry, at most its share of the batch) in one statement (with many
// entities, a scan of the oldest events in the order they were written,
// column pos; otherwise, or when those are no fair batch, a probe of each
// entity), and sends it
// an event of an entity at a time, so one entity is published by one
// relay at a time, in sequence order. While a batch is sent, the relay
// reads the next one (the runs of entities with events in flight start
// after them) and deletes the previous one's published events, in one
// statement. Published events are deleted; a crash between
// the send and the delete publishes again (a duplicate consumers dedupe
// on sqsonce-id, never a loss). After RelayConfig.MaxAttempts failed
// sends (at once when SQS can never take it) an event is parked (dead) and
// holds back its entity only, until [Store.Requeue], [Store.Edit] or
// [Store.Discard].
//
// The sequence rows outlive their events (one row per entity ever
// written) until [Store.Prune] deletes those of drained entities;
// schedule it, for example hourly from one relay. Published and Failed
// match an event by entity, sequence number and id, so a stale relay
// never touches a newer event.
//
// Writers: keep transactions that Put short, since they hold the entity's
// row; under REPEATABLE READ or SERIALIZABLE a concurrent writer of the
// same entity fails with a serialization failure (40001) and must run its
// transaction again.
//
// # Waking relays
//
// Put sends a NOTIFY on Config.Channel (delivered on commit): by default
// the events table's schema-qualified name, such as
// "public.sqsonce_outbox", so outboxes in two schemas of one database do
// not wake each other's relays. A
// [Listener] waits for it on a connection of its own; its Wait is the
// relay's outbox.RelayConfig.WaitFunc, with polling as the fallback (the
// poll interval, a lost connection that the next Wait reconnects):
//
//	l := store.Listener(pool)
//	defer l.Close(ctx)
//	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: sqsClient, QueueURL: url,
//		WaitFunc: l.Wait, PollInterval: 30 * time.Second})
//
// # Privileges
//
// Writers: SELECT, INSERT, UPDATE on sqsonce_outbox_entities and INSERT on
// sqsonce_outbox. Relays: SELECT, UPDATE, DELETE on sqsonce_outbox and
// SELECT, INSERT, UPDATE, DELETE on sqsonce_outbox_leases and
// sqsonce_outbox_relays, plus sqs:SendMessage and sqs:GetQueueAttributes
// on the queue; Prune also needs SELECT, UPDATE, DELETE on
// sqsonce_outbox_entities (UPDATE for its row locks). Both need USAGE
// on the schema; pgstore.Migrate needs CREATE on it (a deploy role).
//
//	GRANT SELECT, INSERT, UPDATE ON sqsonce_outbox_entities TO writer;
//	GRANT INSERT ON sqsonce_outbox TO writer;
//	GRANT SELECT, UPDATE, DELETE ON sqsonce_outbox TO relay;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON sqsonce_outbox_leases, sqsonce_outbox_relays TO relay;
//	GRANT SELECT, UPDATE, DELETE ON sqsonce_outbox_entities TO relay; -- Prune
package outboxpg
