package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/step"
)

// `ledger unknown` lists the credits whose bank charge has an unknown
// outcome (a worker with -bank-policy park dead-letters them with class
// outcome_unknown; any policy leaves one listed while a reconcile cannot
// tell), from the credits' dedupe records. A person asks the bank, then
// records the answer:
//
//	ledger unknown -resolve CREDIT=applied       the bank has the charge: the credit is applied without charging
//	ledger unknown -resolve CREDIT=not-applied   it has none: the credit is charged, then applied
//
// and redrives the dead-letter queue (sqs-redrive move NAME-dlq): each
// redriven credit resumes from its record and completes.

// unknownLine is one line of `ledger unknown -json`.
type unknownLine struct {
	Credit string    `json:"credit"`
	Step   string    `json:"step"`
	Status string    `json:"status"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// Held is true while a worker holds the credit (its lease is live):
	// it cannot be resolved until that ends.
	Held bool `json:"held"`
}

// resolution is one -resolve KEY=applied|not-applied.
type resolution struct {
	key     string
	applied bool
}

// resolutions collects repeated -resolve flags.
type resolutions []resolution

func (r *resolutions) String() string { return fmt.Sprint(*r) }

func (r *resolutions) Set(v string) error {
	key, decision, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("%q: use CREDIT=applied or CREDIT=not-applied", v)
	}
	switch decision {
	case step.ResolvedApplied:
		*r = append(*r, resolution{key, true})
	case step.ResolvedNotApplied:
		*r = append(*r, resolution{key, false})
	default:
		return fmt.Errorf("%q: the decision is applied or not-applied", v)
	}
	return nil
}

// openSteps opens the ledger's dedupe store, where the credits' steps are.
func openSteps(ctx context.Context, n names, c clients) (dedupe.StepStore, error) {
	if n.Store == storePostgres {
		if err := checkPostgres(ctx, c.pg, n.Schema); err != nil {
			return nil, err
		}
		return dedupepg.New(dedupepg.Config{DB: c.pg, Namespace: n.Queue})
	}
	s, err := dedupedynamo.New(dedupedynamo.Config{Client: c.ddb, Table: n.DedupeTable, Namespace: n.Queue})
	if err != nil {
		return nil, err
	}
	if err := s.Check(ctx); err != nil {
		return nil, fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	return s, nil
}

func cmdUnknown(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("unknown", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	stepName := fs.String("step", stepCharge, "the step `NAME` -resolve decides")
	var res resolutions
	fs.Var(&res, "resolve", "record a decision, `CREDIT=applied` or CREDIT=not-applied (repeatable)")
	n, c, err := g.open(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	defer c.close()
	store, err := openSteps(ctx, n, c)
	if err != nil {
		return err
	}
	if len(res) > 0 {
		return resolve(ctx, store, *stepName, res, stdout)
	}
	list, err := store.Unknown(ctx, 0)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, u := range list {
			if err := enc.Encode(unknownLine{Credit: u.Key, Step: u.Step, Status: string(u.Record.Status),
				Reason: u.Record.Reason, Since: u.Record.At, Held: u.Held}); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no step of unknown outcome")
		return nil
	}
	esc := quoted
	for _, u := range list {
		held := ""
		if u.Held {
			held = "  (a worker holds it now)"
		}
		fmt.Fprintf(stdout, "%s  %s  since %s%s\n    %s\n", esc(u.Key), esc(u.Step), u.Record.At.UTC().Format(time.RFC3339), held, esc(u.Record.Reason))
	}
	fmt.Fprintf(stdout, "%d step(s) of unknown outcome: ask the bank (GET /charges/CREDIT), record each answer with\n"+
		"  ledger unknown -resolve CREDIT=applied|not-applied\nthen redrive the dead-letter queue (sqs-redrive move %s)\n", len(list), n.DLQ)
	return nil
}

// resolve records each decision; it reports every one and fails if any
// could not be recorded.
func resolve(ctx context.Context, store dedupe.StepStore, name string, res resolutions, stdout io.Writer) error {
	failed := 0
	for _, r := range res {
		decision := step.ResolvedNotApplied
		if r.applied {
			decision = step.ResolvedApplied
		}
		err := store.Resolve(ctx, r.key, name, r.applied)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%s: %s recorded as %s\n", quoted(r.key), name, decision)
			continue
		case errors.Is(err, step.ErrHeld):
			fmt.Fprintf(stdout, "%s: a worker holds it now; try again once its lease ends\n", quoted(r.key))
		case errors.Is(err, step.ErrNotUnknown):
			fmt.Fprintf(stdout, "%s: no %s of unknown outcome (done, not done, or no such credit)\n", quoted(r.key), name)
		default:
			return err
		}
		failed++
	}
	if failed > 0 {
		return fmt.Errorf("unknown: %d of %d decisions not recorded", failed, len(res))
	}
	return nil
}
