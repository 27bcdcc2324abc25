package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/step"
)

// `ledger work -bank URL` charges each credit at the bank (bank.go) before
// its database transaction, as step "charge" of the credit's dedupe
// record (package step):
//
//	claim the credit's record ─► step "charge": POST URL/charges ─► the credit's transaction,
//	                                                                 which completes the record
//
// The charge's outcome is unknown when the bank's answer never came (a
// dropped connection, a timeout) or was a 5xx other than 503; then the
// next attempt decides by -bank-policy: reconcile (the default) asks
// GET URL/charges/<credit id>, rerun charges again (exact only on a bank
// that dedupes by the Idempotency-Key), park dead-letters the credit with
// class outcome_unknown for `ledger unknown -resolve`. A worker killed
// between the charge and its record leaves the step "started": unknown
// too, decided the same way by the attempt that takes the credit over.

// stepCharge is the name of the bank charge's step.
const stepCharge = "charge"

// bankTimeout bounds one call to the bank; a charge cut off by it has an
// unknown outcome.
const bankTimeout = 10 * time.Second

// bankClient calls the bank's API.
type bankClient struct {
	base string // the bank's URL, without a trailing slash
	http *http.Client
	// backPressure: a 429 or 503 is consumer.Unavailable, with the bank's
	// Retry-After, so that the worker pauses instead of receiving on (see
	// consumer.BackPressure); false (work -back-pressure=false): an
	// ordinary transient failure, retried with the consumer's backoff, as
	// a consumer without back-pressure does. newBankClient sets it.
	backPressure bool
}

// newBankClient returns a client of the bank at base, with a pool of up to
// conns connections.
//
// net/http sends a request again by itself when a kept-alive connection
// closes before any answer, if it deems the request replayable: a GET, or
// any request with a body it can rewind (GetBody set, as NewRequest sets
// for a bytes.Reader) and an Idempotency-Key or X-Idempotency-Key header.
// A charge carries an Idempotency-Key; against a bank that does not dedupe
// by it (-idempotent=false), that silent second send charges twice,
// unseen by the step that records the charge. So a charge's request never
// has GetBody: it is not replayable, and a lost answer surfaces as an
// error, the charge's outcome unknown, for the step's policy to decide.
func newBankClient(base string, conns int) (*bankClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("work: -bank %q: use the bank's URL, http://HOST:PORT", base)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(conns, 2)
	return &bankClient{base: strings.TrimRight(base, "/"), http: &http.Client{Transport: t}, backPressure: true}, nil
}

// chargePost is a POST /charges body.
type chargePost struct {
	Ref     string `json:"ref"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// charge charges c at the bank (Idempotency-Key: the credit id) and
// returns the bank's charge. Its error says what is known of the charge:
//
//   - 429 or 503: the bank is busy or down and charged nothing (the step
//     records it not done): consumer.Unavailable with its Retry-After (a
//     429 as consumer.RateLimited, which also lowers the rate of `work
//     -rate -adaptive`), so the worker pauses and the credit is retried
//     after it; without back-pressure, a plain transient failure;
//   - another 4xx: refused for good: the credit is dead-lettered with the
//     bank's answer, quoted and cut (it is outside text);
//   - another 5xx: the charge may have been made: outcome unknown;
//   - no answer (a dropped connection, a timeout): outcome unknown, as
//     step.IsUnknown judges transport errors.
func (b *bankClient) charge(ctx context.Context, c credit) ([]byte, error) {
	body, _ := json.Marshal(chargePost{Ref: c.ID, Account: c.Account, Amount: c.Amount})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/charges", bytes.NewReader(body))
	if err != nil {
		return nil, step.NotApplied(consumer.Permanent(fmt.Errorf("bank: %w", err)))
	}
	req.GetBody = nil // never sent again by net/http: see newBankClient
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", c.ID)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bank: charge %s: %w", c.ID, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, step.MaxResultBytes+1))
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		if err != nil {
			return nil, fmt.Errorf("bank: charge %s: read the answer: %w", c.ID, err)
		}
		if len(answer) > step.MaxResultBytes {
			answer = answer[:0] // the charge happened; its record does not need the bank's whole answer
		}
		return bytes.TrimSpace(answer), nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		wait := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		err := fmt.Errorf("bank: charge %s: %s (Retry-After %q)", c.ID, resp.Status, resp.Header.Get("Retry-After"))
		switch {
		case !b.backPressure:
			return nil, step.NotApplied(err)
		case resp.StatusCode == http.StatusTooManyRequests:
			return nil, step.NotApplied(consumer.RateLimited(err, wait)) // too fast: work -adaptive slows down
		}
		return nil, step.NotApplied(consumer.Unavailable(err, wait))
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, step.NotApplied(consumer.Permanent(fmt.Errorf("bank: charge %s refused: %s: %s", c.ID, resp.Status, quoteAnswer(answer))))
	default:
		return nil, step.Unknown(fmt.Errorf("bank: charge %s: %s", c.ID, resp.Status))
	}
}

// find asks the bank whether ref was charged: GET /charges/<ref>, 200 with
// the charge or 404. Any other answer, or none, leaves it unknown.
func (b *bankClient) find(ctx context.Context, ref string) (step.Reconciliation, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/charges/"+url.PathEscape(ref), nil)
	if err != nil {
		return step.Reconciliation{}, fmt.Errorf("bank: %w", err)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return step.Reconciliation{}, fmt.Errorf("bank: find %s: %w", ref, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, step.MaxResultBytes+1))
	switch {
	case err != nil:
		return step.Reconciliation{}, fmt.Errorf("bank: find %s: read the answer: %w", ref, err)
	case resp.StatusCode == http.StatusOK:
		if len(answer) > step.MaxResultBytes {
			answer = answer[:0]
		}
		return step.Done(bytes.TrimSpace(answer)), nil
	case resp.StatusCode == http.StatusNotFound:
		return step.NotDone(), nil
	}
	return step.StillUnknown(fmt.Sprintf("bank: find %s: %s", ref, resp.Status)), nil
}

// maxAnswer bounds how much of a bank's answer a dead letter's reason
// keeps.
const maxAnswer = 200

// quoteAnswer is a bank's answer as a reason may show it: at most
// maxAnswer bytes, quoted with every control and non-UTF-8 byte escaped.
func quoteAnswer(b []byte) string {
	s := string(bytes.TrimSpace(b))
	cut := len(s) > maxAnswer
	if cut {
		s = s[:maxAnswer]
	}
	q := strconv.Quote(s)
	if cut {
		q += "…"
	}
	return q
}

// retryAfter reads a Retry-After value (seconds, or an HTTP date) as a
// wait from now: at least 1 s, 1 s when it cannot be read.
func retryAfter(v string, now time.Time) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return max(time.Duration(s)*time.Second, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), time.Second)
	}
	return time.Second
}

// charger charges credits as the step of their dedupe record.
type charger struct {
	bank   *bankClient
	policy step.Policy
	lease  time.Duration
	logger *zap.Logger
}

// wrap returns the handler of a worker with -bank: the credit's record is
// claimed in store, the credit charged (step "charge"), then applied by
// apply, whose transaction (Transactional of the same store) completes
// the record.
func (c *charger) wrap(store dedupe.Store, apply consumer.Handler) (consumer.Handler, error) {
	mw, err := dedupe.New(dedupe.Config{Store: store, Lease: c.lease, Logger: c.logger})
	if err != nil {
		return nil, err
	}
	return mw.Wrap(consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		cr, err := parseCredit(msg.Body)
		if err != nil {
			return consumer.Permanent(err) // nothing to charge
		}
		if _, err := c.charge(ctx, cr); err != nil {
			return err
		}
		return apply.Handle(ctx, msg)
	})), nil
}

// charge runs step "charge" of credit cr with the worker's policy.
func (c *charger) charge(ctx context.Context, cr credit) ([]byte, error) {
	return step.Run(ctx, stepCharge, step.Options{
		Policy:        c.policy,
		ReconcileFunc: func(ctx context.Context) (step.Reconciliation, error) { return c.bank.find(ctx, cr.ID) },
		Timeout:       bankTimeout,
	}, func(ctx context.Context) ([]byte, error) { return c.bank.charge(ctx, cr) })
}

// errNoCharger is a -bank-policy given without -bank.
var errNoCharger = errors.New("work: -bank-policy and -lease need -bank URL")
