// Package limit shares limits on starts across a fleet of workers, through
// a store the fleet already runs: a rate (at most r starts per second, all
// workers together) and a per-key concurrency limit (at most k of a key at
// once, such as two credits of one account). The consumer applies them
// before it starts a message (consumer.Limits); [Rate] and [Slots] apply
// them anywhere else.
//
//	store, err := limitdynamo.New(limitdynamo.Config{Client: dynamodb.NewFromConfig(cfg)})
//	...
//	c, err := consumer.New(consumer.Config{
//		...
//		Limits: consumer.Limits{
//			Rate:  100, // the partner's 100 requests/s, for the whole fleet
//			KeyLimitFunc: func(m *consumer.Message) (string, int) {
//				return aws.ToString(m.Attributes["account"].StringValue), 2 // 2 of an account at once
//			},
//			Store: store, // nil: each process on its own
//		},
//	})
//
// # The rate: blocks of a timeline
//
// A rate of r per second is a timeline of slots 1/r apart, kept in the
// store as one value: the first slot no worker has leased. A worker leases
// a block of slots with one conditional write ([RateStore.Reserve]) and
// spends them at their times, so a store write serves a block of starts
// (a tenth of a second's worth by default), the workers' slots never
// overlap, and the fleet together starts at the rate, evenly, whatever
// the block size: a block only says how far ahead a worker holds its
// slots. A worker leases its next block when its last slot is taken, so
// the timeline runs ahead of now while there is work, and a slot a
// worker leased but did not spend (it ran out of work, or crashed) is
// lost, never made up later in a burst. Clocks must agree (NTP): a
// worker whose clock is d ahead spends its slots d early.
//
// # Per-key concurrency: leased slots
//
// A key's slots are held with an expiry ([SlotStore]): a worker takes one
// before a message of the key starts (one conditional write), extends the
// slots it holds while their messages run, and releases each when its
// message is settled. A crashed worker's slots free themselves when they
// expire. A worker that finds a key full holds the message back, invisible,
// and tries again: see consumer.Limits.
//
// # Stores
//
// [Memory] keeps the limits in one process; limitdynamo (a DynamoDB
// table) and limitpg (PostgreSQL tables, created by pgstore.Migrate with
// pgstore.Limits) share them across a fleet. Another store (Redis, say)
// implements [Store]; limittest is the conformance suite it must pass.
package limit
