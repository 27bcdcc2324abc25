package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/consumer"
)

// bankClient charges each credit at the bank (`ledger bank`, or any
// payment API of the same shape) before the credit's database
// transaction: the external effect a real worker has.
//
// How an answer is classified (what the consumer then does with it):
//
//   - 200 or 201: charged (the transaction runs);
//   - 429 or 503: the bank is busy or down; consumer.Unavailable with its
//     Retry-After (seconds or an HTTP date; for a 429 consumer.RateLimited,
//     which also lowers the rate of `work -rate -adaptive`), so the worker
//     pauses instead of burning receives; with back-pressure off, a plain
//     transient failure (retried with the consumer's backoff, as most
//     consumers do);
//   - any other 4xx: permanent (dead-lettered, the bank's answer quoted and
//     cut to maxAnswer bytes in the reason: it is outside text);
//   - any other 5xx, a timeout, a broken connection: transient, and the
//     charge's outcome unknown. The consumer retries the credit with the
//     same Idempotency-Key: against an idempotent bank a second POST of a
//     key answers with its first charge, so the retry charges nothing new.
//
// Go's http.Transport re-sends, by itself, a request that carries an
// Idempotency-Key header when the reused keep-alive connection it was sent
// on closed before any answer came (net/http treats the header as a
// promise that the POST is idempotent). The bank's dropped answers
// (-drop-rate) hit exactly that case: the charge is applied, the
// connection closed unanswered, and the transport POSTs the same key
// again on a new connection, which the idempotent bank answers 200 with
// the first charge. The client counts and logs (debug) every such re-send
// (resent). Against a bank that does not dedupe by key the re-send would
// charge twice, as would the consumer's own retry: set noTransportResend
// to make every re-send the consumer's, and see the outcome-unknown
// handling for such a bank.
type bankClient struct {
	base   string // the bank's URL, without a trailing slash
	client *http.Client
	log    *zap.Logger
	// backPressure: 429 and 503 are consumer.Unavailable (else plain
	// transient failures).
	backPressure bool
	// noTransportResend turns the transport's own re-send off: the request
	// body can then not be rewound, which net/http requires to send it
	// again.
	noTransportResend bool

	resent  atomic.Int64 // POSTs the transport sent again by itself
	charged atomic.Int64 // credits the bank answered 200 or 201
}

// maxAnswer bounds how much of a bank's answer is kept in an error.
const maxAnswer = 200

// newBankClient returns a client of the bank at base, each call bounded
// by timeout.
func newBankClient(base string, timeout time.Duration, backPressure bool, log *zap.Logger) (*bankClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("work: -bank %q: use the bank's http:// or https:// URL", base)
	}
	return &bankClient{
		base:         strings.TrimRight(base, "/"),
		client:       &http.Client{Timeout: timeout},
		log:          log,
		backPressure: backPressure,
	}, nil
}

// charge charges cr once at the bank (its id is the Idempotency-Key and
// the charge's ref), and returns nil once charged, or an error the
// consumer classifies as bankClient describes.
func (b *bankClient) charge(ctx context.Context, cr credit) error {
	body, err := json.Marshal(map[string]any{"ref": cr.ID, "account": cr.Account, "amount": cr.Amount})
	if err != nil {
		return consumer.Permanent(fmt.Errorf("bank: encode charge %s: %w", cr.ID, err))
	}
	// Each attempt the transport makes gets a connection: a second one is
	// the transport's own re-send (see bankClient).
	var conns atomic.Int32
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns.Add(1) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/charges", bytes.NewReader(body))
	if err != nil {
		return consumer.Permanent(fmt.Errorf("bank: charge %s: %w", cr.ID, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", cr.ID)
	if b.noTransportResend {
		req.GetBody = nil
	}
	resp, err := b.client.Do(req)
	if n := conns.Load(); n > 1 {
		b.resent.Add(int64(n - 1))
		b.log.Debug("bank: the HTTP transport sent the charge again on a new connection (the reused one closed unanswered)",
			zap.String("credit", cr.ID), zap.Int32("sends", n))
	}
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx) // shutdown or a lost lease: the consumer decides
		}
		return fmt.Errorf("bank: charge %s: outcome unknown: %w", cr.ID, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	switch code := resp.StatusCode; {
	case code == http.StatusOK || code == http.StatusCreated:
		b.charged.Add(1)
		return nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		wait := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		err := fmt.Errorf("bank: charge %s: %s (Retry-After %q)", cr.ID, resp.Status, resp.Header.Get("Retry-After"))
		switch {
		case !b.backPressure:
			return err
		case code == http.StatusTooManyRequests:
			return consumer.RateLimited(err, wait) // too fast: work -adaptive slows down
		default:
			return consumer.Unavailable(err, wait)
		}
	case code >= 400 && code < 500:
		return consumer.Permanent(fmt.Errorf("bank: charge %s refused: %s: %s", cr.ID, resp.Status, quoteAnswer(answer)))
	default:
		return fmt.Errorf("bank: charge %s: outcome unknown: %s: %s", cr.ID, resp.Status, quoteAnswer(answer))
	}
}

// quoteAnswer is a bank's answer as it may appear in an error: at most
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

// retryAfter reads a Retry-After header at now: delay-seconds or an HTTP
// date; 0 when absent, invalid or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}
