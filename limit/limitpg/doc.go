// Package limitpg is the PostgreSQL [limit.Store]: a fleet's rate and
// per-key concurrency limits, shared through two tables that
// pgstore.Migrate creates with pgstore.Limits.
//
//	// In a deploy step, once per schema:
//	if _, err := pgstore.Migrate(ctx, pool, pgstore.Limits); err != nil { ... }
//	...
//	store, err := limitpg.New(limitpg.Config{DB: pool})
//	if err != nil { ... }
//	if err := store.Check(ctx); err != nil { ... } // tables missing
//	c, err := consumer.New(consumer.Config{
//		...
//		Limits: consumer.Limits{Rate: 100, Store: store}, // 100 starts a second, the whole fleet
//	})
//
// # Rows
//
// sqsonce_limit_rates holds one row per rate: pk ("rate#<name>") and
// next_ns, the timeline's first slot not leased (ns since the epoch). A
// block is one INSERT ... ON CONFLICT DO UPDATE that adds it to next_ns
// under the row's lock (restarting a timeline that fell behind at now −
// burst), and returns the new next_ns; when the timeline is leased past
// now + ahead it updates nothing.
//
// sqsonce_limit_slots holds one row per slot held: pk ("slots#<name>#<key>",
// the key hashed past 2048 bytes or when it is not UTF-8 text), slot (0 to the limit − 1), holder and
// expires_at. Acquiring inserts the key's lowest free slot, or takes over
// an expired one (a crashed worker's), in one statement; extending and
// releasing update or delete the holder's row. Released slots leave no
// row; a crashed worker's expired rows are taken over by the next holders
// of their slots, so the table holds at most limit rows per key.
//
// Times are the workers' clocks (Config.NowFunc), never the server's.
package limitpg
