// Package outboxdynamo is the DynamoDB outbox: [Store.Put] turns events into
// writes for the caller's TransactWriteItems, and the [Store] is what an
// [outbox.Relay] reads.
//
// Table: pk (S, HASH) and sk (S, RANGE), on-demand, TTL on expires_at;
// [CreateTable] makes it (Config.Table, [DefaultTable] by default), and
// [Store.Check] at start-up fails with an error naming the table and the
// fix. Items (see docs/architecture.md):
//
//	pk = b#NNNN   sk = <entity hash>#<order stamp>#<event id>   an event in partition NNNN
//	pk = h#ENTITY sk = h                                        the entity's last order stamp
//	pk = l        sk = N                                        partition N's lease (owner, until)
//	pk = r        sk = OWNER                                    a live relay (until)
//
// Commit order: each transaction that writes events of an entity also sets
// the entity's order record to the last of its stamps for that entity, on
// condition that the stored stamp is lower than the first. Two writers of
// one entity are serialised by DynamoDB; a writer with any stamp of the
// entity not above the last committed one is cancelled
// ([Store.IsOrderConflict]) and writes again with later stamps
// ([Store.Commit] does this), so two transactions' events never interleave. So stamps rise in commit order, and the
// relay publishes each entity's events by stamp.
//
// CloudFormation:
//
//	OutboxTable:
//	  Type: AWS::DynamoDB::Table
//	  Properties:
//	    BillingMode: PAY_PER_REQUEST
//	    AttributeDefinitions: [{AttributeName: pk, AttributeType: S}, {AttributeName: sk, AttributeType: S}]
//	    KeySchema: [{AttributeName: pk, KeyType: HASH}, {AttributeName: sk, KeyType: RANGE}]
//	    TimeToLiveSpecification: {AttributeName: expires_at, Enabled: true}
//
// IAM: writers need dynamodb:TransactWriteItems (and the writes of their
// own tables); relays need dynamodb:Query, PutItem, UpdateItem, DeleteItem
// and BatchWriteItem on the table, and sqs:SendMessage and
// sqs:GetQueueAttributes (its MaximumMessageSize) on the queue;
// CreateTable needs DescribeTable, CreateTable, DescribeTimeToLive and
// UpdateTimeToLive, and Store.Check DescribeTable.
package outboxdynamo
