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
)

// creditNamespace derives an API credit's id from its Idempotency-Key
// record (UUID v5), so that a key used again after its record expired
// names the credit it made before.
var creditNamespace = uuid.MustParse("1b4e28ba-2fa1-11d2-883f-0016d3cca427")

// postgresCredits opens the PostgreSQL idempotency store and outbox and
// returns the credits handler on them. The handler runs in the
// middleware's transactional mode: set idempotency.Config.BeginTxFunc to
// the store's BeginTx.
func postgresCredits(ctx context.Context, n names, c clients, delay time.Duration) (*idempg.Store, http.Handler, error) {
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
	return keys, creditsHandlerPostgres(box, delay), nil
}

// errKeyTaken is a record key whose credit has another account or amount:
// the key was used again after its record expired.
var errKeyTaken = errors.New("this Idempotency-Key already created another credit")

// creditsHandlerPostgres accepts a credit in the transaction the
// idempotency middleware opened for the request (BeginTxFunc): the
// credit's row, its outbox event and the stored 201 commit together, or
// none of them does. The transaction holds the key while it runs, so a
// retry meanwhile gets 409, and a request whose process dies frees its key
// at once: nothing of it committed, and the retry runs it again.
func creditsHandlerPostgres(box *outboxpg.Store, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, amount, ok := readCredit(w, r, delay)
		if !ok {
			return
		}
		tx := idempg.TxFromContext(r.Context())
		scope, err := caller(r)
		key, ok := idempotency.ParseKey(r.Header.Get(idempotency.HeaderKey))
		if tx == nil || err != nil || !ok {
			// The middleware, in its transactional mode, refuses such
			// requests before they get here.
			http.Error(w, "ledger: no request transaction, caller or Idempotency-Key", http.StatusInternalServerError)
			return
		}
		rk := idempotency.RecordKey(scope, key)
		resp := creditResponse{CreditID: uuid.NewSHA1(creditNamespace, []byte(rk)).String(), Account: account, Amount: amount}
		payload, _ := json.Marshal(map[string]any{"id": resp.CreditID, "account": account, "amount": amount})
		ev := outbox.WithTraceContext(r.Context(), outbox.Event{ID: resp.CreditID, Entity: account, Type: "credit", Payload: string(payload)})
		err = putCredit(r.Context(), tx, box, rk, resp, ev)
		switch {
		case errors.Is(err, errKeyTaken):
			idempotency.Release(r.Context()) // rolls back; not stored
			http.Error(w, err.Error(), http.StatusConflict)
			return
		case err != nil:
			// A 5xx rolls the transaction back: the retry runs again.
			http.Error(w, "ledger: the credit was not stored", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// putCredit writes the credit's row and its outbox event in tx. A row of
// the record key already there was committed by a request of the same key
// whose Idempotency-Key record has since expired: the same credit answers
// it again, without a second event; another credit is errKeyTaken.
func putCredit(ctx context.Context, tx pgx.Tx, box *outboxpg.Store, rk string, resp creditResponse, ev outbox.Event) error {
	tag, err := tx.Exec(ctx, `INSERT INTO `+tableAPICredits+` (record_key, credit_id, account, amount)
		VALUES ($1, $2, $3, $4) ON CONFLICT (record_key) DO NOTHING`, rk, resp.CreditID, resp.Account, resp.Amount)
	if err != nil {
		return fmt.Errorf("credit: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return box.Put(ctx, tx, ev)
	}
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
