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
	a := decideClaim(c, err, true, m.cfg.NowFunc())
	if a.run {
		h.runTx(w, r, rk, c.Token, tx)
		return
	}
	m.rollback(ctx, rk, tx, false)
	m.answer(w, rk, a, nil)
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
		if exited {
			// Nothing of the request commits, and the rollback frees the key.
			m.settle(w, r, rec, st, rk, token, ended{exit: exitGoexit})
		}
	}()
	panicked := call(h.next, rec, r.WithContext(ctx))
	exited = false
	if panicked != nil {
		m.settle(w, r, rec, st, rk, token, ended{exit: exitPanicked})
		panic(panicked)
	}
	m.settle(w, r, rec, st, rk, token, ended{exit: exitReturned})
}
