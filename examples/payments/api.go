package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idempg"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
)

// serve runs the API until ctx ends, then lets running requests finish.
func serve(ctx context.Context, a *app, addr string, stdout io.Writer) error {
	if err := a.requireTables(ctx, "payments"); err != nil {
		return err
	}
	keys, err := idempg.New(idempg.Config{DB: a.pool})
	if err != nil {
		return err
	}
	if err := keys.Check(ctx); err != nil {
		return err
	}
	box, err := outboxpg.New(outboxpg.Config{DB: a.pool})
	if err != nil {
		return err
	}
	mw, err := idempotency.New(idempotency.Config{
		Store: keys,
		// Each keyed request runs in a transaction the middleware opens:
		// it holds the key while it lasts (a retry meanwhile gets 409, a
		// request whose process dies frees it at once), the handler writes
		// in it, and the stored response commits with those writes.
		BeginTxFunc: keys.BeginTx,
		ScopeFunc:   caller,
		// The same JSON with its keys in another order is the same request.
		FingerprintFunc: idempotency.CanonicalJSONFingerprint,
		Logger:          a.logger,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Wrap(createPayment(box, a.logger)))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	a.logger.Info("payments API listening", zap.String("addr", ln.Addr().String()))
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served
	return err
}

// caller names the caller, the scope of its Idempotency-Keys: the bearer
// token as it stands. The example checks nothing; a real API verifies the
// token and scopes by the identity it proves (an account or API key id,
// which outlives a rotated secret).
func caller(r *http.Request) (string, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "", errors.New("missing bearer token")
	}
	return token, nil
}

// payment is a created payment: the 201's body, the outbox event's payload
// and the message the worker books.
type payment struct {
	ID        string    `json:"id"`
	Account   string    `json:"account"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Reference string    `json:"reference"`
	CreatedAt time.Time `json:"created_at"`
}

var (
	validAccount   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	validCurrency  = regexp.MustCompile(`^[A-Z]{3}$`)
	validReference = regexp.MustCompile(`^[\x20-\x7e]{0,140}$`)
)

// createPayment is POST /payments. It runs in the request's transaction
// (idempg.TxFromContext): the payment row and its outbox event are written
// there, and the middleware commits them with the 201 it stores. A 4xx
// after Release, a 5xx or a panic rolls all of it back, so the client's
// retry with the same key runs again; a replay of the 201 is byte for byte.
func createPayment(box *outboxpg.Store, logger *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var p payment
		if err := decodePayment(r.Body, &p); err != nil {
			idempotency.Release(ctx) // not stored: the key with a corrected body runs
			problem(w, http.StatusBadRequest, err.Error())
			return
		}
		who, err := caller(r)
		tx := idempg.TxFromContext(ctx)
		if err != nil || tx == nil {
			// The middleware sends neither here.
			problem(w, http.StatusInternalServerError, "no caller or no request transaction")
			return
		}
		p.ID = uuid.Must(uuid.NewV7()).String()
		p.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
		body, _ := json.Marshal(p)
		_, err = tx.Exec(ctx, `INSERT INTO payments (id, caller, account, amount, currency, reference, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, p.ID, who, p.Account, p.Amount, p.Currency, p.Reference, p.CreatedAt)
		if err == nil {
			// Published after the commit, never if it rolls back; one
			// account's payments leave in commit order.
			err = box.Put(ctx, tx, outbox.Event{ID: p.ID, Entity: p.Account, Type: "payment.created", Payload: string(body)})
		}
		if err != nil {
			logger.Warn("payments: create failed, rolled back", zap.Error(err))
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusServiceUnavailable, "the payment was not created; retry with the same Idempotency-Key")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(append(body, '\n'))
	})
}

// decodePayment reads a payment's fields from a JSON body and checks them.
// Its errors name fields, never echo the client's values.
func decodePayment(body io.Reader, p *payment) error {
	var in struct {
		Account   string `json:"account"`
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
		Reference string `json:"reference"`
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		return errors.New(`the body must be one JSON object: {"account","amount","currency","reference"}`)
	}
	switch {
	case !validAccount.MatchString(in.Account):
		return errors.New("account: 1 to 64 letters, digits, '-' or '_'")
	case in.Amount <= 0:
		return errors.New("amount: a positive integer, in minor units")
	case !validCurrency.MatchString(in.Currency):
		return errors.New("currency: an ISO 4217 code, such as EUR")
	case !validReference.MatchString(in.Reference):
		return errors.New("reference: at most 140 printable ASCII characters")
	}
	*p = payment{Account: in.Account, Amount: in.Amount, Currency: in.Currency, Reference: in.Reference}
	return nil
}

// problem answers an application/problem+json (RFC 9457), as the
// middleware does.
func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", idempotency.ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
}
