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

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
	"github.com/sqsonce/sqsonce/idempotency/idempg"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
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
	lease := fs.Duration("lease", 10*time.Second, "how long a running request holds its Idempotency-Key (dynamodb; on postgres the request's transaction holds it)")
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
	defer c.close()
	logger, err := newLogger(level)
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	logger = logger.With(zap.String("ledger", n.Queue))

	cfg := idempotency.Config{
		ScopeFunc: caller,
		Lease:     *lease,
		Logger:    logger,
	}
	var credits http.Handler
	if n.Store == storePostgres {
		var keys *idempg.Store
		keys, credits, err = postgresCredits(ctx, n, c, *handlerDelay)
		if keys != nil {
			// Each request runs in a transaction that holds its key (no
			// lease): the credit, its outbox event and the stored
			// response commit together.
			cfg.Store, cfg.BeginTxFunc = keys, keys.BeginTx
		}
	} else {
		cfg.Store, credits, err = dynamoCredits(ctx, n, c, logger, *handlerDelay)
	}
	if err != nil {
		return err
	}
	mw, err := idempotency.New(cfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /credits", mw.Wrap(credits))

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

// dynamoCredits opens the DynamoDB idempotency store and outbox and
// returns the credits handler on them.
func dynamoCredits(ctx context.Context, n names, c clients, logger *zap.Logger, delay time.Duration) (idempotency.Store, http.Handler, error) {
	keys, err := idemdynamo.New(idemdynamo.Config{Client: c.ddb, Table: n.IdempotencyTable, Namespace: n.Queue, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	if err := keys.Check(ctx); err != nil {
		return nil, nil, fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	box, err := outboxdynamo.New(outboxdynamo.Config{Client: c.ddb, Table: n.Outbox})
	if err != nil {
		return nil, nil, err
	}
	if err := box.Check(ctx); err != nil {
		return nil, nil, fmt.Errorf("%w (run `ledger setup` first)", err)
	}
	return keys, creditsHandler(box, delay), nil
}

// caller is the caller the request's bearer token names, the scope of its
// Idempotency-Keys. A token CALLER.SECRET names CALLER (the text before
// the first dot), so a client whose secret is refreshed between retries
// stays the same caller and its retry is replayed, not run again; a token
// without a dot is its own caller. A missing token, or one whose caller
// part is empty, answers 401. The example checks no secret: a real API
// verifies the token first and scopes by the identity it proves.
func caller(r *http.Request) (string, error) {
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "", errors.New("missing bearer token")
	}
	name, _, _ := strings.Cut(token, ".")
	if strings.TrimSpace(name) == "" {
		return "", errors.New("the bearer token names no caller")
	}
	return name, nil
}

// creditsHandler accepts a credit: the 201 response, its Idempotency-Key
// record and the outbox event that carries the credit to the queue commit
// in one DynamoDB transaction.
func creditsHandler(box *outboxdynamo.Store, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, amount, ok := readCredit(w, r, delay)
		if !ok {
			return
		}
		resp := creditResponse{CreditID: uuid.Must(uuid.NewV7()).String(), Account: account, Amount: amount}
		payload, _ := json.Marshal(map[string]any{"id": resp.CreditID, "account": account, "amount": amount})
		// Built at commit time, and again if another request committed a
		// later credit of the same account first (the outbox keeps each
		// account's credits in commit order). It carries the request's trace
		// context, so the worker's span joins the request's trace.
		ev := outbox.WithTraceContext(r.Context(), outbox.Event{ID: resp.CreditID, Entity: account, Type: "credit", Payload: string(payload)})
		err := idemdynamo.TransactFunc(r.Context(), func() ([]ddbtypes.TransactWriteItem, error) {
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

// readCredit waits the handler delay, then reads the request's credit;
// when it reports false it has answered the request. A client that hangs
// up meanwhile does not stop it: the middleware does not cancel a keyed
// request's context, so the request finishes and stores its response,
// and the client's retry gets that response.
func readCredit(w http.ResponseWriter, r *http.Request, delay time.Duration) (account string, amount int64, ok bool) {
	time.Sleep(delay)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		invalid(w, r, fmt.Errorf("read body: %w", err))
		return "", 0, false
	}
	fields, err := decodeObject(string(body))
	if err != nil {
		invalid(w, r, err)
		return "", 0, false
	}
	account, amount, err = accountAmount(fields)
	if err != nil {
		invalid(w, r, err)
		return "", 0, false
	}
	return account, amount, true
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
