package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/pgstore"
)

// With -store postgres, every table of a ledger lives in a schema of its
// own, named after the ledger (NAME, or NAME-fifo): sqsonce's dedupe,
// outbox and idempotency tables, created by their migrations, and the
// ledger's three tables below.
const (
	// tableAccounts holds one row per account: its balance.
	tableAccounts = "ledger_accounts"
	// tableJournal holds one row per applied credit, counting how often it
	// was applied: the dedupe row, the balance and the journal row commit
	// in one transaction, so `ledger audit` can prove no credit was
	// applied twice.
	tableJournal = "ledger_journal"
	// tableAPICredits holds the credits the API accepted, one per
	// Idempotency-Key, written with their outbox event.
	tableAPICredits = "ledger_api_credits"

	// maxIdentifier is PostgreSQL's longest name (NAMEDATALEN - 1).
	maxIdentifier = 63
)

const ledgerSchemaSQL = `
CREATE TABLE IF NOT EXISTS ` + tableAccounts + ` (
    account text   PRIMARY KEY,
    balance bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS ` + tableJournal + ` (
    credit_id text   PRIMARY KEY,
    account   text   NOT NULL,
    amount    bigint NOT NULL,
    applied   bigint NOT NULL
);
-- When a credit was first applied, and the time a delayed one was due.
ALTER TABLE ` + tableJournal + ` ADD COLUMN IF NOT EXISTS applied_at timestamptz,
    ADD COLUMN IF NOT EXISTS not_before timestamptz;
CREATE TABLE IF NOT EXISTS ` + tableAPICredits + ` (
    record_key text        PRIMARY KEY, -- idempotency.RecordKey(scope, key)
    credit_id  text        NOT NULL UNIQUE,
    account    text        NOT NULL,
    amount     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)`

// qualified is schema.table, quoted.
func qualified(schema, table string) string { return pgx.Identifier{schema, table}.Sanitize() }

// openPostgres opens a pool on DATABASE_URL whose sessions use schema:
// every unqualified table is the ledger's own. app names the sessions
// (application_name), so an operator can tell workers, servers and relays
// apart in pg_stat_activity.
func openPostgres(ctx context.Context, schema, app string) (*pgxpool.Pool, error) {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return nil, errors.New("-store postgres: DATABASE_URL is not set")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The URL may hold a password: never print it.
		return nil, errors.New("-store postgres: DATABASE_URL is not a valid connection string")
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	if len(app) > maxIdentifier {
		app = app[:maxIdentifier]
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}

// The tables pgstore.Migrate creates in the ledger's schema.
const (
	pgDedupeTable      = "sqsonce_dedupe"      // pgstore.Dedupe
	pgIdempotencyTable = "sqsonce_idempotency" // pgstore.Idempotency
	pgOutboxTable      = "sqsonce_outbox"      // pgstore.Outbox (and its _entities, _leases, _relays)
)

// setupPostgres creates the ledger's schema, applies sqsonce's migrations
// in it and creates the ledger's tables. Every step is idempotent.
func setupPostgres(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", schema, err)
	}
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe, pgstore.Outbox, pgstore.Idempotency); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	// Concurrent setups of one ledger serialise here, as the migrations do.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sqsonce-ledger-setup:' || current_schema()))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ledgerSchemaSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: create the ledger's tables: %w", err)
	}
	return nil
}

// checkPostgres fails when the ledger's tables are missing.
func checkPostgres(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	for _, table := range []string{tableAccounts, tableJournal, tableAPICredits, pgDedupeTable, pgIdempotencyTable, pgOutboxTable} {
		var found bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, qualified(schema, table)).Scan(&found); err != nil {
			return fmt.Errorf("postgres: check %s: %w", table, err)
		}
		if !found {
			return fmt.Errorf("postgres: table %s is missing (run `ledger -store postgres setup` first)", qualified(schema, table))
		}
	}
	return nil
}

// creditSQL applies a credit: the account's balance and the credit's
// journal row, in the transaction that holds the message's dedupe row.
const (
	creditBalanceSQL = `INSERT INTO ` + tableAccounts + ` AS a (account, balance) VALUES ($1, $2)
ON CONFLICT (account) DO UPDATE SET balance = a.balance + excluded.balance`
	creditJournalSQL = `INSERT INTO ` + tableJournal + ` AS j (credit_id, account, amount, applied, applied_at, not_before) VALUES ($1, $2, $3, 1, $4, $5)
ON CONFLICT (credit_id) DO UPDATE SET applied = j.applied + 1`
)

// applyCreditTx applies c in tx, noting the handler's time (the
// transaction commits after it) as when it was first applied.
func applyCreditTx(ctx context.Context, tx pgx.Tx, c credit) error {
	if _, err := tx.Exec(ctx, creditBalanceSQL, c.Account, c.Amount); err != nil {
		return fmt.Errorf("balance of %s: %w", c.Account, err)
	}
	var notBefore *time.Time
	if !c.NotBefore.IsZero() {
		notBefore = &c.NotBefore
	}
	if _, err := tx.Exec(ctx, creditJournalSQL, c.ID, c.Account, c.Amount, time.Now(), notBefore); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// balancesPostgres reads every account. A row the ledger could not have
// written (a NULL balance) is an error, never skipped: the total must be
// the table's.
func balancesPostgres(ctx context.Context, pool *pgxpool.Pool) (map[string]int64, int64, error) {
	rows, err := pool.Query(ctx, `SELECT account, balance::text FROM `+tableAccounts+` ORDER BY account`)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: read %s: %w (run `ledger -store postgres setup` first)", tableAccounts, err)
	}
	defer rows.Close()
	accounts := map[string]int64{}
	var total int64
	for rows.Next() {
		var id, bal *string
		if err := rows.Scan(&id, &bal); err != nil {
			return nil, 0, fmt.Errorf("postgres: read %s: %w", tableAccounts, err)
		}
		if id == nil || bal == nil {
			return nil, 0, fmt.Errorf("postgres: %s: malformed row (account %s, balance %s)", tableAccounts, orNull(id), orNull(bal))
		}
		v, err := strconv.ParseInt(*bal, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("postgres: account %s: balance %q: %w", *id, *bal, err)
		}
		accounts[*id] = v
		total += v
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("postgres: read %s: %w", tableAccounts, err)
	}
	return accounts, total, nil
}

// auditPostgres reads the journal; a malformed row is an error.
func auditPostgres(ctx context.Context, pool *pgxpool.Pool) (auditReport, error) {
	var rep auditReport
	rows, err := pool.Query(ctx, `SELECT credit_id, amount::text, applied::text,
	coalesce(floor(extract(epoch FROM not_before) * 1000)::bigint, 0), coalesce(floor(extract(epoch FROM applied_at) * 1000)::bigint, 0)
	FROM `+tableJournal+` ORDER BY credit_id`)
	if err != nil {
		return rep, fmt.Errorf("postgres: read %s: %w (run `ledger -store postgres setup` first)", tableJournal, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, amount, applied *string
		var notBefore, appliedAt int64
		if err := rows.Scan(&id, &amount, &applied, &notBefore, &appliedAt); err != nil {
			return rep, fmt.Errorf("postgres: read %s: %w", tableJournal, err)
		}
		if id == nil || amount == nil || applied == nil {
			return rep, fmt.Errorf("postgres: %s: malformed row (credit %s, amount %s, applied %s)", tableJournal, orNull(id), orNull(amount), orNull(applied))
		}
		a, err1 := strconv.ParseInt(*amount, 10, 64)
		n, err2 := strconv.ParseInt(*applied, 10, 64)
		if err1 != nil || err2 != nil || n < 1 {
			return rep, fmt.Errorf("postgres: %s: credit %s: malformed row (amount %s, applied %s)", tableJournal, *id, *amount, *applied)
		}
		rep.Credits++
		rep.Total += a
		if n > 1 {
			rep.AppliedTwice++
			rep.Examples = append(rep.Examples, *id)
		}
		rep.delayed(*id, notBefore, appliedAt)
	}
	if err := rows.Err(); err != nil {
		return rep, fmt.Errorf("postgres: read %s: %w", tableJournal, err)
	}
	return rep, nil
}

func orNull(s *string) string {
	if s == nil {
		return "NULL"
	}
	return strconv.Quote(*s)
}
