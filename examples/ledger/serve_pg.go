package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idempg"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/pgstore"
)

// creditNamespace derives an API credit's id from its Idempotency-Key
// record (UUID v5), so that running a request again yields the same
// credit.
var creditNamespace = uuid.MustParse("1b4e28ba-2fa1-11d2-883f-0016d3cca427")

// postgresCredits opens the PostgreSQL idempotency store and outbox and
// returns the credits handler on them.
func postgresCredits(ctx context.Context, n names, c clients, delay time.Duration) (idempotency.Store, http.Handler, error) {
	if err := checkPostgres(ctx, c.pg, n.Schema); err != nil {
		return nil, nil, err
	}
	keys, err := idempg.New(idempg.Config{DB: c.pg})
	if err != nil {
		return nil, nil, err
	}
	box, err := outboxpg.New(outboxpg.Config{DB: c.pg})
	if err != nil {
		return nil, nil, err
	}
	return keys, creditsHandlerPostgres(c, box, delay), nil
}

// errKeyTaken is a record key whose credit has another account or amount:
// the key was used again after its record expired.
var errKeyTaken = errors.New("this Idempotency-Key already created another credit")

// creditsHandlerPostgres accepts a credit: the credit's row, one per
// Idempotency-Key record, and its outbox event commit in one PostgreSQL
// transaction. The middleware stores the response after that commit, in a
// write of its own; if the process dies between the two, the key's next
// request runs again, finds the credit's row and answers the same credit,
// with no second event: the effect stays once.
func creditsHandlerPostgres(c clients, box *outboxpg.Store, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, amount, ok := readCredit(w, r, delay)
		if !ok {
			return
		}
		scope, err := caller(r)
		key, ok := idempotency.ParseKey(r.Header.Get(idempotency.HeaderKey))
		if err != nil || !ok {
			// The middleware refuses such requests before they get here.
			idempotency.Release(r.Context())
			http.Error(w, "no caller or Idempotency-Key", http.StatusBadRequest)
			return
		}
		rk := idempotency.RecordKey(scope, key)
		resp := creditResponse{CreditID: uuid.NewSHA1(creditNamespace, []byte(rk)).String(), Account: account, Amount: amount}
		payload, _ := json.Marshal(map[string]any{"id": resp.CreditID, "account": account, "amount": amount})
		ev := outbox.WithTraceContext(r.Context(), outbox.Event{ID: resp.CreditID, Entity: account, Type: "credit", Payload: string(payload)})
		for attempt := 0; ; attempt++ {
			err = pgx.BeginFunc(r.Context(), c.pg, func(tx pgx.Tx) error {
				return putCredit(r.Context(), tx, box, rk, resp, ev)
			})
			if err == nil || !pgstore.IsTransient(err) || attempt == 2 {
				break
			}
		}
		switch {
		case errors.Is(err, errKeyTaken):
			idempotency.Release(r.Context())
			http.Error(w, err.Error(), http.StatusConflict)
			return
		case err != nil:
			idempotency.Release(r.Context())
			http.Error(w, "ledger: the credit was not stored", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// putCredit writes the credit's row and, the first time only, its outbox
// event, in tx.
func putCredit(ctx context.Context, tx pgx.Tx, box *outboxpg.Store, rk string, resp creditResponse, ev outbox.Event) error {
	tag, err := tx.Exec(ctx, `INSERT INTO `+tableAPICredits+` (record_key, credit_id, account, amount)
		VALUES ($1, $2, $3, $4) ON CONFLICT (record_key) DO NOTHING`, rk, resp.CreditID, resp.Account, resp.Amount)
	if err != nil {
		return fmt.Errorf("credit: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return box.Put(ctx, tx, ev)
	}
	// A run of this key committed before: its response was not stored.
	var account string
	var amount int64
	if err := tx.QueryRow(ctx, `SELECT account, amount FROM `+tableAPICredits+` WHERE record_key = $1`, rk).Scan(&account, &amount); err != nil {
		return fmt.Errorf("credit: read: %w", err)
	}
	if account != resp.Account || amount != resp.Amount {
		return errKeyTaken
	}
	return nil
}
