package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
)

// openOutbox opens the ledger's outbox in its store, checking that it
// exists. lease is the relay's partition lease (0: the store's default).
func openOutbox(ctx context.Context, n names, c clients, lease time.Duration) (outbox.Store, error) {
	if n.Store == storePostgres {
		if err := checkPostgres(ctx, c.pg, n.Schema); err != nil {
			return nil, err
		}
		// The default channel is the schema's own, so another ledger's
		// commits do not wake this one's relays.
		return outboxpg.New(outboxpg.Config{DB: c.pg, Lease: lease})
	}
	box, err := outboxdynamo.New(outboxdynamo.Config{Client: c.ddb, Table: n.Outbox, Lease: lease})
	if err != nil {
		return nil, err
	}
	if err := box.Check(ctx); err != nil {
		return nil, fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	return box, nil
}

// outboxReport is what `ledger outbox -json` prints.
type outboxReport struct {
	Pending      int      `json:"pending"`             // accepted credits not yet sent to the queue
	OldestSecs   float64  `json:"oldest_seconds"`      // age of the oldest pending one
	Dead         int      `json:"dead"`                // parked after failed sends
	Requeued     int      `json:"requeued"`            // dead ones made pending again (-requeue)
	Discarded    string   `json:"discarded,omitempty"` // the dead event dropped (-discard)
	DeadEventIDs []string `json:"dead_event_ids,omitempty"`
}

// cmdOutbox shows what waits in the outbox; with -discard it drops one
// parked (dead) event, so that its account's later credits go out, and
// with -requeue it sends the parked events again.
func cmdOutbox(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("outbox", stderr)
	requeue := fs.Bool("requeue", false, "make parked (dead) events pending again")
	discard := fs.String("discard", "", "drop the parked (dead) event `ID` without sending it, so its account's later credits go out")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	n, c, err := g.open(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	defer c.close()
	box, err := openOutbox(ctx, n, c, 0)
	if err != nil {
		return err
	}
	var rep outboxReport
	if *discard != "" {
		if err := box.Discard(ctx, *discard); err != nil {
			if errors.Is(err, outbox.ErrNotDead) {
				return fmt.Errorf("outbox -discard %s: no dead event has that id (`ledger outbox` lists them)", quoted(*discard))
			}
			return err
		}
		rep.Discarded = *discard
	}
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
	if rep.Discarded != "" {
		fmt.Fprintf(stdout, "discarded %s\n", quoted(rep.Discarded))
	}
	fmt.Fprintf(stdout, "%s: %d pending (oldest %.0fs), %d dead", n.Outbox, rep.Pending, rep.OldestSecs, rep.Dead)
	if *requeue {
		fmt.Fprintf(stdout, ", %d requeued", rep.Requeued)
	}
	fmt.Fprintln(stdout)
	for _, ev := range s.DeadEvents {
		fmt.Fprintf(stdout, "  dead %s (%s) after %d attempts: %s\n", quoted(ev.ID), quoted(ev.Entity), ev.Attempts, quoted(ev.LastError))
	}
	return nil
}

// quoted is s as it is when every character prints, else Go-quoted, so
// that text a client wrote (an account, an id) cannot move the cursor or
// rewrite what an operator reads.
func quoted(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}
