package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/idempotency"
)

// postReport is what `ledger post -json` prints.
type postReport struct {
	Keys     int   `json:"keys"`     // distinct Idempotency-Keys sent
	Created  int   `json:"created"`  // keys that ended with a 201 (their credit exists)
	Replays  int   `json:"replays"`  // 201s replayed from a stored response
	Conflict int   `json:"conflict"` // 409s: the key was still running
	Reused   int   `json:"reused"`   // 422s: a key sent again with another body
	Invalid  int   `json:"invalid"`  // 400s for a broken body, corrected and sent again
	Dropped  int   `json:"dropped"`  // requests the client gave up on mid-flight
	Retries  int   `json:"retries"`  // requests sent again after an error
	Total    int64 `json:"total"`    // the sum of the created credits
	// Accounts is the balance each account must reach, from the distinct
	// 201 responses.
	Accounts map[string]int64 `json:"accounts"`
	// Order is, per account, the credit ids in the order their 201s came
	// back (sequential per account with -sequential).
	Order map[string][]string `json:"order,omitempty"`
}

// cmdPost is a client of `ledger serve`: it POSTs credits with retries of
// the same Idempotency-Key (concurrent, after a dropped connection, to the
// other server), reuses some keys with another body and sends some broken
// bodies first, and reports what it was answered.
func cmdPost(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("post", stderr)
	servers := fs.String("servers", "", "comma-separated base `URLs` of `ledger serve` (required)")
	n := fs.Int("n", 100, "number of credits (distinct keys)")
	accounts := fs.Int("accounts", 10, "number of accounts the credits spread over")
	concurrency := fs.Int("concurrency", 8, "requests in flight")
	token := fs.String("token", "demo-client", "bearer token: CALLER.SECRET names CALLER, the keys' scope; a token without a dot is its own caller")
	sequential := fs.Bool("sequential", false, "one request at a time per account, to check the order on a FIFO queue")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *servers == "" || *n < 0 || *accounts < 1 || *concurrency < 1 {
		return usagef("post: -servers is required; -n ≥ 0, -accounts ≥ 1, -concurrency ≥ 1")
	}
	p := &poster{urls: strings.Split(*servers, ","), token: *token, client: &http.Client{}}
	p.rep = postReport{Accounts: map[string]int64{}, Order: map[string][]string{}}
	grp, gctx := errgroup.WithContext(ctx)
	grp.SetLimit(*concurrency)
	if *sequential {
		for a := range *accounts {
			grp.Go(func() error {
				for i := a; i < *n; i += *accounts {
					if err := p.credit(gctx, i, *accounts, false); err != nil {
						return err
					}
				}
				return nil
			})
		}
	} else {
		for i := range *n {
			grp.Go(func() error { return p.credit(gctx, i, *accounts, true) })
		}
	}
	if err := grp.Wait(); err != nil {
		return err
	}
	p.rep.Keys = *n
	if !*sequential {
		p.rep.Order = nil
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(p.rep)
	}
	fmt.Fprintf(stdout, "keys %d, created %d, replays %d, 409s %d, 422s %d, 400s %d, dropped %d, retries %d, total %d\n",
		p.rep.Keys, p.rep.Created, p.rep.Replays, p.rep.Conflict, p.rep.Reused, p.rep.Invalid, p.rep.Dropped, p.rep.Retries, p.rep.Total)
	return nil
}

type poster struct {
	urls   []string
	token  string
	client *http.Client

	mu  sync.Mutex
	rep postReport
}

type answer struct {
	status   int
	replayed bool
	credit   creditResponse
}

func (p *poster) count(f func(r *postReport)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.rep)
}

// send makes one POST; timeout > 0 drops the connection after it.
func (p *poster) send(ctx context.Context, url, key, body string, timeout time.Duration) (answer, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/credits", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set(idempotency.HeaderKey, key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true"}
	if a.status == http.StatusCreated {
		if err := json.Unmarshal(b, &a.credit); err != nil {
			return answer{}, fmt.Errorf("201 with body %q: %w", b, err)
		}
	}
	return a, nil
}

// until sends until the answer is final (not a 409, a 5xx or an error),
// to a random server after the first try; it counts what it sees.
func (p *poster) until(ctx context.Context, first int, key, body string) (answer, error) {
	for try := 0; try < 100; try++ {
		url := p.urls[(first+try)%len(p.urls)]
		if try > 0 {
			url = p.urls[mrand.IntN(len(p.urls))]
			p.count(func(r *postReport) { r.Retries++ })
		}
		a, err := p.send(ctx, url, key, body, 0)
		switch {
		case ctx.Err() != nil:
			return answer{}, ctx.Err()
		case err != nil:
			// A server was killed or restarted: try again.
		case a.status == http.StatusConflict:
			p.count(func(r *postReport) { r.Conflict++ })
		case a.status >= 500:
		default:
			if a.replayed {
				p.count(func(r *postReport) { r.Replays++ })
			}
			return a, nil
		}
		select {
		case <-ctx.Done():
			return answer{}, ctx.Err()
		case <-time.After(time.Duration(50+mrand.IntN(150)) * time.Millisecond):
		}
	}
	return answer{}, fmt.Errorf("key %s: no final answer after 100 tries", key)
}

// credit runs the scenario of credit i; mixed enables the concurrent,
// dropped, reused and invalid variants.
func (p *poster) credit(ctx context.Context, i, accounts int, mixed bool) error {
	key := fmt.Sprintf("key-%06d-%d", i, mrand.Int64())
	account := fmt.Sprintf("acct-%03d", i%accounts)
	amount := int64(1 + mrand.IntN(1000))
	body := fmt.Sprintf(`{"account":%q,"amount":%d}`, account, amount)
	kind := i % 20
	if !mixed {
		kind = -1
	}
	switch kind {
	case 1: // a broken body first: 400, not stored, so the corrected one runs
		a, err := p.until(ctx, i, key, fmt.Sprintf(`{"account":%q,"amount":"%d"}`, account, amount))
		if err != nil {
			return err
		}
		if a.status != http.StatusBadRequest {
			return fmt.Errorf("key %s: a broken body got %d, want 400", key, a.status)
		}
		p.count(func(r *postReport) { r.Invalid++ })
	case 2: // a dropped connection: the client gives up, then retries
		if _, err := p.send(ctx, p.urls[i%len(p.urls)], key, body, time.Millisecond); err != nil {
			p.count(func(r *postReport) { r.Dropped++ })
		}
	case 3, 4: // the same request to every server at once
		var wg sync.WaitGroup
		for s := range p.urls {
			wg.Go(func() {
				if a, err := p.send(ctx, p.urls[s], key, body, 0); err == nil && a.status == http.StatusConflict {
					p.count(func(r *postReport) { r.Conflict++ })
				}
			})
		}
		wg.Wait()
	}
	a, err := p.until(ctx, i, key, body)
	if err != nil {
		return err
	}
	if a.status != http.StatusCreated || a.credit.Account != account || a.credit.Amount != amount || a.credit.CreditID == "" {
		return fmt.Errorf("key %s: got %d %+v, want 201 for %s %d", key, a.status, a.credit, account, amount)
	}
	if kind == 5 || kind == 6 { // a retry to the other server replays the same credit
		b, err := p.until(ctx, i+1, key, body)
		if err != nil {
			return err
		}
		if b.status != http.StatusCreated || !b.replayed || b.credit != a.credit {
			return fmt.Errorf("key %s: retry got %d replayed=%v %+v, want the stored %+v", key, b.status, b.replayed, b.credit, a.credit)
		}
	}
	if kind == 7 { // the key again with another body: 422
		other := fmt.Sprintf(`{"account":%q,"amount":%d}`, account, amount+1)
		b, err := p.until(ctx, i, key, other)
		if err != nil {
			return err
		}
		if b.status != http.StatusUnprocessableEntity {
			return fmt.Errorf("key %s: reused with another body got %d, want 422", key, b.status)
		}
		p.count(func(r *postReport) { r.Reused++ })
	}
	p.count(func(r *postReport) {
		r.Created++
		r.Total += amount
		r.Accounts[account] += amount
		r.Order[account] = append(r.Order[account], a.credit.CreditID)
	})
	return nil
}
