// Package idemdynamo is the DynamoDB [idempotency.Store]: key records in a
// table with the dedupe table's schema (it may be the same table, under
// its own namespace), completed, with the handler's writes, in one
// transaction.
//
// # Records
//
// One item per (scope, key), keyed by pk (S) alone:
//
//	pk                S  "<namespace>#<hex sha256 of scope and key>" (idempotency.RecordKey)
//	status            S  IN_PROGRESS or COMPLETED
//	lease_until       N  ms; when an IN_PROGRESS claim may be taken over
//	token             S  random per claim; fences Extend, Complete and Release
//	fingerprint       S  hash of method, path, query, body (and listed headers)
//	expires_at        N  s; the TTL attribute (Config.TTL, 24 hours by default)
//	response_status   N  the stored status (COMPLETED)
//	response_headers  M  the allow-listed headers: name → L of S
//	response_body     B  the body, byte for byte (absent when empty)
//	response_not_retained  BOOL  true when the response could not be kept (no body)
//
// A claim is one PutItem with the condition "attribute_not_exists(pk) OR
// expires_at < :now OR (status = IN_PROGRESS AND lease_until < :now_ms AND
// fingerprint = :fp)" (a crashed request's claim is taken over by the same
// request only; another is key reuse, 422, until the record expires) and
// ReturnValuesOnConditionCheckFailure=ALL_OLD: a replay costs that one
// call, the stored response coming back with the condition failure. Expiry
// is judged by the store's clock, never left to TTL deletion (which lags
// up to 48 hours). The client's key and the caller's scope are never
// stored.
//
// # Use
//
//	store, err := idemdynamo.New(idemdynamo.Config{Client: dynamodb.NewFromConfig(cfg), Table: "orders-idempotency"})
//	if err != nil { ... }
//	if err := store.Check(ctx); err != nil { ... } // table missing or mis-keyed
//	mw, err := idempotency.New(idempotency.Config{Store: store, ScopeFunc: callerID})
//	http.Handle("POST /credits", mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		// ... validate; on a bad body: idempotency.Release(r.Context()) and a 400
//		err := idemdynamo.Transact(r.Context(), types.TransactWriteItem{Put: &types.Put{
//			TableName: aws.String("credits"),
//			Item:      creditItem,
//		}})
//		if err != nil { ... }
//		w.WriteHeader(http.StatusCreated) // sent only once the credit and this response are committed
//		json.NewEncoder(w).Encode(credit)
//	})))
//
// Completion is one conditional UpdateItem, or with writes one
// TransactWriteItems: the writes plus the fenced update of the record. A
// condition failing on a write cancels everything (the client gets 409,
// the key is released); a record taken over by another owner cancels
// everything too (409, lease lost). DynamoDB's limits apply: 99 writes
// besides the record, 4 MB per transaction, 400 KB per item: a response
// that would not fit in the record is refused with
// idempotency.ErrTooLarge, which the middleware treats like a response
// over its MaxResponseBytes (256 KiB by default): delivered and the record
// completed without it, or, with writes, not committed. Writes DynamoDB
// can never accept (over 99, over 4 MB, a ValidationException) are
// refused with idempotency.ErrPermanent (the client gets 500, no
// Retry-After); a transaction whose answer never came (a timeout, a
// broken connection, an internal error) returns
// idempotency.ErrOutcomeUnknown (503, "outcome unknown"). Errors are
// told apart by error code, never by message.
//
// # Table
//
// [CreateTable] makes it (on-demand, TTL on expires_at); [Store.Check] at
// start-up fails with an error naming the table and the fix. In
// CloudFormation:
//
//	IdempotencyTable:
//	  Type: AWS::DynamoDB::Table
//	  Properties:
//	    TableName: sqsonce-idempotency
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
// The API needs exactly these actions on the table (TransactWriteItems is
// authorised per item by PutItem/UpdateItem/DeleteItem/ConditionCheckItem
// on each table it writes, so grant the handler's own tables the actions
// its writes use):
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
//	  "Resource": "arn:aws:dynamodb:REGION:ACCOUNT:table/sqsonce-idempotency"
//	}
//
// [CreateTable] additionally needs dynamodb:CreateTable and
// dynamodb:UpdateTimeToLive (give those to the deploy role, not the API).
package idemdynamo
