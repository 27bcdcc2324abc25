package idempotency

import (
	"context"
	"net/http"

	"go.uber.org/zap"
)

// serveTx serves a keyed request in the transactional mode
// (Config.BeginTxFunc): the request's own transaction claims the key and
// holds it until it ends. No lease is kept, so nothing writes the record
// while the handler works in the transaction (under REPEATABLE READ or
// SERIALIZABLE such a write would make the completion a serialization
// failure), and a request whose connection dies frees its key at once.
func (h *handler) serveTx(w http.ResponseWriter, r *http.Request, rk, fp string) {
	m := h.m
	// A client that hangs up mid-claim must not leave a transaction open.
	ctx, cancel := m.settleContext(r)
	defer cancel()
	tx, err := m.cfg.BeginTxFunc(ctx)
	if err != nil {
		m.log(rk).Warn("idempotency: begin transaction failed: nothing ran", zap.Error(err))
		writeProblem(w, http.StatusServiceUnavailable, TypeStoreUnavailable, "the request's transaction could not begin; nothing ran", 1)
		m.observe(OutcomeStoreError, http.StatusServiceUnavailable)
		return
	}
	c, err := tx.Claim(ctx, rk, fp)
	if err == nil && c.Status == Claimed {
		h.runTx(w, r, rk, c.Token, tx)
		return
	}
	m.rollback(ctx, rk, tx)
	switch {
	case err != nil:
		m.log(rk).Warn("idempotency: claim failed", zap.Error(err))
		writeProblem(w, http.StatusServiceUnavailable, TypeStoreUnavailable, "the idempotency store did not answer; nothing ran", 1)
		m.observe(OutcomeStoreError, http.StatusServiceUnavailable)
	case c.Status == Completed:
		replay(w, c.Response)
		m.observe(OutcomeReplayed, c.Response.Status)
	case c.Status == InProgress:
		// Another transaction holds the key while it lives: it is running
		// now, and its end is unknown.
		wait := 1
		if !c.LeaseUntil.IsZero() {
			wait = retryAfter(c.LeaseUntil.Sub(m.cfg.NowFunc()))
		}
		writeProblem(w, http.StatusConflict, TypeInProgress, "a request with this key is still running; retry after it ends", wait)
		m.observe(OutcomeInProgress, http.StatusConflict)
	case c.Status == KeyReused:
		writeProblem(w, http.StatusUnprocessableEntity, TypeKeyReused, "this key was used for a different request (method, path, query or body)", 0)
		m.observe(OutcomeKeyReused, http.StatusUnprocessableEntity)
	default:
		m.log(rk).Error("idempotency: claim: unexpected status", zap.Int("status", int(c.Status)))
		writeProblem(w, http.StatusInternalServerError, TypeStoreUnavailable, "", 0)
		m.observe(OutcomeStoreError, http.StatusInternalServerError)
	}
}

// runTx runs the handler in the transaction tx that holds the key, then
// commits its work with the stored response, or rolls it all back.
func (h *handler) runTx(w http.ResponseWriter, r *http.Request, rk, token string, tx Tx) {
	m := h.m
	st := &state{tx: tx}
	// Not cancelled when the client hangs up: the request finishes and its
	// response is stored for the retry a dropped connection brings.
	ctx := context.WithValue(context.WithValue(context.WithoutCancel(r.Context()), stateKey{}, st), txKey{}, tx)
	rec := newRecorder(w, st, m.cfg.MaxResponseBytes, m.replay)
	exited := true
	defer func() {
		if !exited {
			return
		}
		// The handler called runtime.Goexit (t.FailNow in a test server,
		// for one): its request was abandoned, as by a panic. Nothing of
		// it commits, and the rollback frees the key.
		sctx, scancel := m.settleContext(r)
		defer scancel()
		m.rollback(sctx, rk, tx)
		m.log(rk).Warn("idempotency: the handler called runtime.Goexit: rolled back, key freed")
		m.observe(OutcomeReleased, http.StatusInternalServerError)
	}()
	panicked := call(h.next, rec, r.WithContext(ctx))
	exited = false

	sctx, scancel := m.settleContext(r)
	defer scancel()
	if panicked != nil {
		m.rollback(sctx, rk, tx)
		m.observe(OutcomeReleased, http.StatusInternalServerError)
		panic(panicked)
	}
	m.settleTx(sctx, w, rec, st, rk, token)
}
