// Package dedupedynamo is sqsonce's DynamoDB dedupe store: the [Store] for the
// lease-based dedupe middleware (dedupe.New), and [Transactional], which commits a
// handler's own DynamoDB writes in one transaction with the message's
// dedupe record.
//
// # Records
//
// One item per message key, in a table keyed by pk (S) alone:
//
//	pk           S  "<namespace>#<key>" (hashed past 2048 bytes: "sha256:<hex>")
//	status       S  IN_PROGRESS or COMPLETED
//	lease_until  N  ms; when an IN_PROGRESS claim may be taken over
//	token        S  random per claim; fences Extend, Complete and Release
//	fingerprint  S  hash of the body; same key + another body = key reuse
//	expires_at   N  s; the TTL attribute (Config.TTL, 30 days by default)
//
// A claim is one PutItem with the condition "attribute_not_exists(pk) OR
// expires_at < :now OR (status = IN_PROGRESS AND lease_until < :now_ms AND
// fingerprint = :fp)" (an empty fingerprint matches any) and
// ReturnValuesOnConditionCheckFailure=ALL_OLD, so a duplicate costs no
// extra read. A crashed owner's claim is taken over by the same body only:
// another body is key reuse until the record expires. Expiry is judged by the store's clock, never left to TTL
// deletion (which lags up to 48 hours).
//
// # Lease mode: external side effects
//
//	store, err := dedupedynamo.New(dedupedynamo.Config{Client: dynamodb.NewFromConfig(cfg), Namespace: "orders"})
//	if err != nil { ... }
//	if err := store.Check(ctx); err != nil { ... } // table missing or mis-keyed
//	dd, err := dedupe.New(dedupe.Config{Store: store})
//	if err != nil { ... }
//	c, err := consumer.New(consumer.Config{
//		Handler:    consumer.HandlerFunc(sendEmail),
//		Middleware: []consumer.Middleware{dd.Wrap},
//		...
//	})
//
// The handler runs once per key unless the worker dies between the effect
// and the completion; pass msg.Key() downstream as an idempotency key.
//
// # Transactional mode: effects in DynamoDB, exactly once
//
//	handler := dedupedynamo.Transactional(store, func(ctx context.Context, msg *consumer.Message) ([]types.TransactWriteItem, error) {
//		var e Credit
//		if err := json.Unmarshal([]byte(msg.Body), &e); err != nil {
//			return nil, consumer.Permanent(err)
//		}
//		return []types.TransactWriteItem{{Update: &types.Update{
//			TableName:        aws.String("accounts"),
//			Key:              map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: e.Account}},
//			UpdateExpression: aws.String("ADD balance :amount"),
//			ExpressionAttributeValues: map[string]types.AttributeValue{
//				":amount": &types.AttributeValueMemberN{Value: strconv.FormatInt(e.Amount, 10)},
//			},
//		}}}, nil
//	}, nil)
//
// The writes and the COMPLETED record commit together or not at all: a
// crash before the commit leaves nothing (the redelivery applies the
// effect), a crash after it leaves the record (the redelivery is acked as a
// duplicate). No claim is made, so the handler needs no dedupe middleware.
//
// The commit is what finds a duplicate: the handler's function runs for
// every delivery, a duplicate of a message committed long ago included,
// and its writes are then cancelled with the transaction, whose condition
// on the dedupe record fails. The effect stays exactly once; the function
// and a transaction run once more per duplicate. When the function is
// costly (it calls a service) or duplicates are common, set
// [TxOptions].SkipCompleted: one strongly consistent GetItem before the
// function acks a key already COMPLETED without running it (the worker
// then needs dynamodb:GetItem too); any other record, or none, runs the
// function and the transaction decides, so two first deliveries racing
// still commit once.
// Limits (DynamoDB's): at most 99 writes per message (100 with the dedupe
// record) and 4 MB in all; larger results fail permanently with a
// [*TooLargeError]. [VersionGuard] makes a write apply only when the
// event's version is newer than the stored one.
//
// # Table
//
// [CreateTable] makes it (on-demand, TTL on expires_at); [Store.Check] at
// start-up fails with an error naming the table and the fix. In
// CloudFormation:
//
//	DedupeTable:
//	  Type: AWS::DynamoDB::Table
//	  Properties:
//	    TableName: sqsonce-dedupe
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
// The worker needs exactly these actions on the dedupe table
// (TransactWriteItems is authorised per item by PutItem/UpdateItem/
// DeleteItem/ConditionCheckItem on each table it writes, so in
// transactional mode grant the handler's own tables the actions its writes
// use; with TxOptions.SkipCompleted add dynamodb:GetItem):
//
//	{
//	  "Effect": "Allow",
//	  "Action": [
//	    "dynamodb:PutItem",
//	    "dynamodb:UpdateItem",
//	    "dynamodb:DeleteItem",
//	    "dynamodb:DescribeTable",
//	    "dynamodb:DescribeTimeToLive"
//	  ],
//	  "Resource": "arn:aws:dynamodb:REGION:ACCOUNT:table/sqsonce-dedupe"
//	}
//
// [CreateTable] additionally needs dynamodb:CreateTable and
// dynamodb:UpdateTimeToLive (give those to the deploy role, not the worker).
package dedupedynamo
