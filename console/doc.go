// Package console is a web console for the dead letters, the outbox and
// the idempotency keys of sqsonce: an [http.Handler] to mount behind your
// own admin authentication, or to serve for one operator with
// `sqs-redrive ui`.
//
// It is built on package redrive (list, peek, move, export; every rule of
// a move is redrive's own), the outbox stores and the idempotency stores:
//
//   - the overview: the queues (by prefix) with their visible, in-flight
//     and delayed counts, their DLQ and its depth, each DLQ's oldest
//     sampled message; refreshed live;
//   - a DLQ: its failures grouped by class and reason with counts, first
//     and last seen; filters by class, reason, age, source queue, FIFO
//     group or any redrive filter expression; a message's attributes,
//     failure, attempts and source, its body only on request;
//   - actions: redrive a selection or a filter (a dry run first, then the
//     move with its progress live), export it as JSON lines, delete it
//     behind a typed confirmation (to a backup file first);
//   - the outbox's pending, oldest and dead events (requeue, discard), and
//     a caller's Idempotency-Key looked up.
//
// Reading a DLQ page is a redrive peek: it takes the messages in flight
// while it reads and makes them visible again at once; should the console
// stop mid-read, they come back within the Redriver's visibility timeout.
//
// Safety: every request needs the console's token (401 without it), every
// state-changing request its CSRF token (403 without it), ReadOnly removes
// every action, pages are server-rendered with html/template under a
// strict Content-Security-Policy (one script file, no inline script), and
// everything a message or a client wrote is escaped. Each action is
// logged at info level (who, action, queue, count), never a body.
//
//	r, err := redrive.New(redrive.Config{Client: sqs.NewFromConfig(cfg)})
//	if err != nil { ... }
//	c, err := console.New(console.Config{Redriver: r, QueuePrefix: "orders", BasePath: "/admin/dlq"})
//	if err != nil { ... }
//	defer c.Close()
//	mux.Handle("/admin/dlq/", http.StripPrefix("/admin/dlq", requireAdmin(c)))
//	link := "/admin/dlq/?token=" + c.Token() // for the operator; never log it
package console
