// Package limitdynamo is the DynamoDB [limit.Store]: a fleet's rate and
// per-key concurrency limits, shared through one table.
//
//	store, err := limitdynamo.New(limitdynamo.Config{Client: dynamodb.NewFromConfig(cfg)})
//	if err != nil { ... }
//	if err := store.Check(ctx); err != nil { ... } // table missing or mis-keyed
//	c, err := consumer.New(consumer.Config{
//		...
//		Limits: consumer.Limits{Rate: 100, Store: store}, // 100 starts a second, the whole fleet
//	})
//
// # Items
//
// One item per rate, in a table keyed by pk (S) alone:
//
//	pk          S  "rate#<name>"
//	next        N  the timeline's first slot not leased, ns since the epoch
//	expires_at  N  s; the TTL attribute: a day after the timeline's end
//
// A block of slots is one UpdateItem "SET next = next + :block" on the
// condition "next BETWEEN :now−burst AND :now+ahead", which returns the new
// next (the block is the span before it): the fleet's blocks are additions
// DynamoDB applies one after the other, so they never conflict. A timeline
// that fell behind (idle) restarts with one conditional PutItem; one leased
// past now + ahead leases nothing, and the condition failure returns its
// next (ReturnValuesOnConditionCheckFailure) without another read.
//
// One item per key of a per-key limit:
//
//	pk          S  "slots#<name>#<key>" (the key hashed past 2048 bytes, or when not UTF-8)
//	holders     M  holder → expiry (N, ms since the epoch)
//	v           N  one more at each change
//	expires_at  N  s; the TTL attribute: a day after the last expiry
//
// Acquiring is one UpdateItem that adds the holder on "size(holders) <
// :limit"; when the map is full by count but some entries have expired
// (a crashed worker's), a second UpdateItem removes them and adds the
// holder on the version the failure returned. Extending and releasing are
// one UpdateItem each, on the holder's entry.
//
// # Table
//
// [CreateTable] makes it (on-demand, TTL on expires_at); [Store.Check]
// at start-up fails with an error naming the table and the fix. The
// schema is the dedupe table's (dedupedynamo), so one CloudFormation
// resource of that shape serves:
//
//	LimitsTable:
//	  Type: AWS::DynamoDB::Table
//	  Properties:
//	    TableName: sqsonce-limits
//	    BillingMode: PAY_PER_REQUEST
//	    AttributeDefinitions:
//	      - {AttributeName: pk, AttributeType: S}
//	    KeySchema:
//	      - {AttributeName: pk, KeyType: HASH}
//	    TimeToLiveSpecification:
//	      AttributeName: expires_at
//	      Enabled: true
//
// # IAM
//
// The worker needs dynamodb:UpdateItem, dynamodb:PutItem,
// dynamodb:DescribeTable and dynamodb:DescribeTimeToLive on the table;
// [CreateTable] also dynamodb:CreateTable and dynamodb:UpdateTimeToLive
// (give those to the deploy role).
package limitdynamo
