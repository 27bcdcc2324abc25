package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	outboxdynamo "github.com/sqsonce/sqsonce/outbox/dynamo"
)

// outboxReport is what `ledger outbox -json` prints.
type outboxReport struct {
	Pending      int      `json:"pending"`        // accepted credits not yet sent to the queue
	OldestSecs   float64  `json:"oldest_seconds"` // age of the oldest pending one
	Dead         int      `json:"dead"`           // parked after failed sends
	Requeued     int      `json:"requeued"`       // dead ones made pending again (-requeue)
	DeadEventIDs []string `json:"dead_event_ids,omitempty"`
}

// cmdOutbox shows what waits in the outbox, and with -requeue sends the
// parked (dead) events again.
func cmdOutbox(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("outbox", stderr)
	requeue := fs.Bool("requeue", false, "make parked (dead) events pending again")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	n, c, err := g.open(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	if err := outboxdynamo.Check(ctx, c.ddb, n.Outbox); err != nil {
		return fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	box, err := outboxdynamo.New(outboxdynamo.Config{Client: c.ddb, Table: n.Outbox})
	if err != nil {
		return err
	}
	var rep outboxReport
	if *requeue {
		if rep.Requeued, err = box.Requeue(ctx); err != nil {
			return err
		}
	}
	s, err := box.Stats(ctx)
	if err != nil {
		return err
	}
	rep.Pending, rep.Dead = s.Pending, s.Dead
	if !s.Oldest.IsZero() {
		rep.OldestSecs = time.Since(s.Oldest).Seconds()
	}
	for _, ev := range s.DeadEvents {
		rep.DeadEventIDs = append(rep.DeadEventIDs, ev.ID)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "%s: %d pending (oldest %.0fs), %d dead", n.Outbox, rep.Pending, rep.OldestSecs, rep.Dead)
	if *requeue {
		fmt.Fprintf(stdout, ", %d requeued", rep.Requeued)
	}
	fmt.Fprintln(stdout)
	for _, ev := range s.DeadEvents {
		fmt.Fprintf(stdout, "  dead %s (%s) after %d attempts: %s\n", ev.ID, ev.Entity, ev.Attempts, ev.LastError)
	}
	return nil
}
