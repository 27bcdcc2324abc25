package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/idempotency"
	idemdynamo "github.com/sqsonce/sqsonce/idempotency/dynamo"
	"github.com/sqsonce/sqsonce/outbox"
	outboxdynamo "github.com/sqsonce/sqsonce/outbox/dynamo"
)

// serveShutdownTimeout is how long SIGTERM waits for running requests.
const serveShutdownTimeout = 20 * time.Second

// typeInvalidCredit is the problem type of a POST /credits body that breaks
// the credit rules.
const typeInvalidCredit = "urn:sqsonce:ledger:invalid-credit"

// creditResponse is the body of a 201 from POST /credits.
type creditResponse struct {
	CreditID string `json:"credit_id"`
	Account  string `json:"account"`
	Amount   int64  `json:"amount"`
}

func cmdServe(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("serve", stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen on `HOST:PORT` (port 0 picks a free one)")
	handlerDelay := fs.Duration("handler-delay", 0, "sleep after the key is claimed, to make \"in progress\" observable")
	lease := fs.Duration("lease", 10*time.Second, "how long a running request holds its Idempotency-Key")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var level zapcore.Level
	n, c, err := g.open(ctx, fs, args, func() error {
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return usagef("serve: -log-level %q: use debug, info, warn or error", *logLevel)
		}
		if *handlerDelay < 0 || *lease <= 0 {
			return usagef("serve: -handler-delay must not be negative, -lease must be positive")
		}
		return nil
	})
	if err != nil {
		return err
	}
	logger, err := consumer.NewLogger(level)
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	logger = logger.With(zap.String("ledger", n.Queue))

	keys, err := idemdynamo.New(idemdynamo.Config{Client: c.ddb, Table: n.IdempotencyTable, Namespace: n.Queue, Logger: logger})
	if err != nil {
		return err
	}
	if err := keys.Check(ctx); err != nil {
		return fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	box, err := outboxdynamo.New(outboxdynamo.Config{Client: c.ddb, Table: n.Outbox})
	if err != nil {
		return err
	}
	if err := outboxdynamo.Check(ctx, c.ddb, n.Outbox); err != nil {
		return fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	mw, err := idempotency.New(idempotency.Config{
		Store:     keys,
		ScopeFunc: bearerToken,
		Lease:     *lease,
		Logger:    logger,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /credits", mw.Wrap(creditsHandler(box, *handlerDelay)))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	logger.Info("ledger API listening", zap.String("addr", ln.Addr().String()))

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	<-served
	logger.Info("ledger API stopped")
	return nil
}

// bearerToken is the caller's scope: its bearer token. A missing or empty
// token answers 401.
func bearerToken(r *http.Request) (string, error) {
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "", errors.New("missing bearer token")
	}
	return token, nil
}

// creditsHandler accepts a credit: the 201 response, its Idempotency-Key
// record and the outbox event that carries the credit to the queue commit
// in one DynamoDB transaction.
func creditsHandler(box *outboxdynamo.Store, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				// The client went away: store nothing, so its retry runs.
				t.Stop()
				idempotency.Release(r.Context())
				return
			}
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			invalid(w, r, fmt.Errorf("read body: %w", err))
			return
		}
		fields, err := decodeObject(string(body))
		if err != nil {
			invalid(w, r, err)
			return
		}
		account, amount, err := accountAmount(fields)
		if err != nil {
			invalid(w, r, err)
			return
		}
		resp := creditResponse{CreditID: uuid.Must(uuid.NewV7()).String(), Account: account, Amount: amount}
		payload, _ := json.Marshal(map[string]any{"id": resp.CreditID, "account": account, "amount": amount})
		// Built at commit time, and again if another request committed a
		// later credit of the same account first (the outbox keeps each
		// account's credits in commit order). It carries the request's trace
		// context, so the worker's span joins the request's trace.
		ev := outbox.WithTraceContext(r.Context(), outbox.Event{ID: resp.CreditID, Entity: account, Type: "credit", Payload: string(payload)})
		err = idempotency.TransactFunc(r.Context(), func() ([]ddbtypes.TransactWriteItem, error) {
			return box.Put(ev)
		}, box.IsOrderConflict)
		if err != nil {
			idempotency.Release(r.Context())
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(resp)
	})
}

// invalid answers 400 with a problem and releases the key, so the same key
// with a corrected body runs.
func invalid(w http.ResponseWriter, r *http.Request, err error) {
	idempotency.Release(r.Context())
	w.Header().Set("Content-Type", idempotency.ProblemContentType)
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":   typeInvalidCredit,
		"title":  "invalid credit",
		"status": http.StatusBadRequest,
		"detail": err.Error(),
	})
}
