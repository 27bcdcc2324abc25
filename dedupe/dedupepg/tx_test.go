package dedupepg_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// ledger is a dedupe store plus the handler's own tables.
type ledger struct {
	pool  *pgxpool.Pool
	store *dedupepg.Store
	runs  atomic.Int64 // credit calls
}

func newLedger(t *testing.T) *ledger {
	t.Helper()
	pool := newPool(t)
	if _, err := pool.Exec(context.Background(), `
		CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE journal (message_id text PRIMARY KEY, account text NOT NULL, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	s, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: "ledger"})
	if err != nil {
		t.Fatal(err)
	}
	return &ledger{pool: pool, store: s}
}

// credit is the effect of a message "account:amount": the balance and a
// journal line.
func (l *ledger) credit(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
	l.runs.Add(1)
	account, amountStr, ok := strings.Cut(msg.Body, ":")
	amount, err := strconv.ParseInt(amountStr, 10, 64)
	if !ok || err != nil {
		return consumer.Permanent(errors.New("bad body"))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO accounts (id, balance) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + excluded.balance`, account, amount); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO journal (message_id, account, amount) VALUES ($1, $2, $3)`, msg.Key(), account, amount)
	return err
}

func (l *ledger) balance(t *testing.T, account string) int64 {
	t.Helper()
	var b int64
	err := l.pool.QueryRow(context.Background(), `SELECT balance FROM accounts WHERE id = $1`, account).Scan(&b)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return b
}

func (l *ledger) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := l.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func process(h consumer.Handler, msg *consumer.Message) consumertest.Result {
	return consumertest.Process(context.Background(), h, msg)
}

// TestTransactionalExactlyOnceUnderConcurrentDuplicates delivers 20
// messages 5 times each from 50 goroutines at once: every effect is applied
// once, every other copy is acked as a duplicate.
func TestTransactionalExactlyOnceUnderConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	h := dedupepg.Transactional(l.store, l.credit, nil)
	const messages, goroutines = 20, 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[consumer.Outcome]int{}
		errs     []error
	)
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for _, i := range []int{g % messages, (g + 7) % messages} {
				// Each copy is its own SQS delivery (a new receipt handle),
				// of the same sqsonce-id and body.
				msg := consumertest.NewMessage(fmt.Sprintf("acct-%d:%d", i%3, i+1), consumertest.WithID(fmt.Sprintf("m-%02d", i)))
				r := process(h, msg)
				mu.Lock()
				outcomes[r.Outcome]++
				if r.Outcome != consumer.OutcomeAck && r.Outcome != consumer.OutcomeDuplicate {
					errs = append(errs, r.Err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d deliveries failed, first: %v", len(errs), errs[0])
	}
	if outcomes[consumer.OutcomeAck] != messages || outcomes[consumer.OutcomeDuplicate] != 2*goroutines-messages {
		t.Fatalf("outcomes %v, want %d acks and %d duplicates", outcomes, messages, 2*goroutines-messages)
	}
	want := map[string]int64{}
	for i := range messages {
		want[fmt.Sprintf("acct-%d", i%3)] += int64(i + 1)
	}
	for account, b := range want {
		if got := l.balance(t, account); got != b {
			t.Errorf("%s balance %d, want %d (each credit once)", account, got, b)
		}
	}
	if n := l.count(t, "journal"); n != messages {
		t.Errorf("%d journal lines, want %d", n, messages)
	}
	if n := l.count(t, "sqsonce_dedupe WHERE status = 'COMPLETED'"); n != messages {
		t.Errorf("%d completed dedupe rows, want %d", n, messages)
	}
}

// TestTransactionalKilledBackend terminates the handler's backend in the
// middle of its transaction (pg_terminate_backend, as a crash or failover
// does): nothing of that run is applied, the run again applies the effect
// once.
func TestTransactionalKilledBackend(t *testing.T) {
	t.Parallel()
	for _, retries := range []int{3, -1} {
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			t.Parallel()
			l := newLedger(t)
			var killed atomic.Bool
			fn := func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
				if err := l.credit(ctx, tx, msg); err != nil {
					return err
				}
				if killed.CompareAndSwap(false, true) {
					testenv.PostgresTerminate(t, tx.Conn().PgConn().PID())
					// The effect was written in the dead transaction; the
					// next statement finds the backend gone.
					_, err := tx.Exec(ctx, `SELECT 1`)
					if err == nil {
						t.Error("a statement on a terminated backend succeeded")
					}
					return err
				}
				return nil
			}
			h := dedupepg.Transactional(l.store, fn, &dedupepg.TxOptions{Retries: retries})
			msg := func() *consumer.Message { return consumertest.NewMessage("acct:5", consumertest.WithID("m-1")) }
			r := process(h, msg())
			if retries < 0 {
				// No retry in the handler: a transient failure, retried by
				// the consumer with backoff, and nothing applied.
				if r.Outcome != consumer.OutcomeRetry || !pgstore.IsTransient(r.Err) {
					t.Fatalf("killed backend: outcome %v (%v), want a transient retry", r.Outcome, r.Err)
				}
				if b, n := l.balance(t, "acct"), l.count(t, "sqsonce_dedupe"); b != 0 || n != 0 {
					t.Fatalf("after the killed transaction: balance %d, %d dedupe rows; want nothing applied", b, n)
				}
				r = process(h, msg()) // the redelivery
			}
			if r.Outcome != consumer.OutcomeAck {
				t.Fatalf("outcome %v (%v), want ack", r.Outcome, r.Err)
			}
			if r := process(h, msg()); r.Outcome != consumer.OutcomeDuplicate {
				t.Fatalf("third delivery: %v (%v), want duplicate", r.Outcome, r.Err)
			}
			if b := l.balance(t, "acct"); b != 5 {
				t.Fatalf("balance %d, want 5 (applied once)", b)
			}
			if n := l.count(t, "journal"); n != 1 {
				t.Fatalf("%d journal lines, want 1", n)
			}
			if n := l.runs.Load(); n != 2 {
				t.Fatalf("credit ran %d times, want 2 (killed, then applied)", n)
			}
		})
	}
}

// TestTransactionalDeadlockRetried makes two messages lock two accounts in
// opposite orders: PostgreSQL aborts one with a deadlock (40P01), which runs
// again and applies; both effects are applied once.
func TestTransactionalDeadlockRetried(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	if _, err := l.pool.Exec(ctx, `INSERT INTO accounts VALUES ('a', 0), ('b', 0)`); err != nil {
		t.Fatal(err)
	}
	var deadlocks atomic.Int64
	var barrier sync.WaitGroup
	barrier.Add(2)
	var first sync.Map
	fn := func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		from, to, _ := strings.Cut(msg.Body, ">")
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = $1`, from); err != nil {
			return err
		}
		if _, loaded := first.LoadOrStore(msg.Key(), true); !loaded {
			barrier.Done()
			barrier.Wait() // both hold their first row
		}
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = $1`, to)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			deadlocks.Add(1)
		}
		return err
	}
	h := dedupepg.Transactional(l.store, fn, nil)
	var wg sync.WaitGroup
	results := make([]consumertest.Result, 2)
	for i, body := range []string{"a>b", "b>a"} {
		wg.Go(func() { results[i] = process(h, consumertest.NewMessage(body, consumertest.WithID("t-"+body))) })
	}
	wg.Wait()
	for i, r := range results {
		if r.Outcome != consumer.OutcomeAck {
			t.Fatalf("transfer %d: %v (%v), want ack", i, r.Outcome, r.Err)
		}
	}
	// PostgreSQL aborts one of the two; on a loaded machine a rerun can
	// meet the other again before it commits, so more than one may be seen.
	if deadlocks.Load() < 1 {
		t.Fatalf("%d deadlocks seen, want at least 1", deadlocks.Load())
	}
	if a, b := l.balance(t, "a"), l.balance(t, "b"); a != 0 || b != 0 {
		t.Fatalf("balances a=%d b=%d, want 0 and 0 (each transfer once)", a, b)
	}
	if n := l.count(t, "sqsonce_dedupe"); n != 2 {
		t.Fatalf("%d dedupe rows, want 2", n)
	}
}

// TestTransactionalSerializationFailureRetried runs SERIALIZABLE
// transactions whose read-then-write races fail with 40001 and run again.
func TestTransactionalSerializationFailureRetried(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := context.Background()
	if _, err := l.pool.Exec(ctx, `INSERT INTO accounts VALUES ('s', 0)`); err != nil {
		t.Fatal(err)
	}
	var failures atomic.Int64
	var barrier sync.WaitGroup
	barrier.Add(2)
	var first sync.Map
	fn := func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		var b int64
		if err := tx.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 's'`).Scan(&b); err != nil {
			return err
		}
		if _, loaded := first.LoadOrStore(msg.Key(), true); !loaded {
			barrier.Done()
			barrier.Wait() // both read the same balance
		}
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = $1 WHERE id = 's'`, b+1)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" {
			failures.Add(1)
		}
		return err
	}
	h := dedupepg.Transactional(l.store, fn, &dedupepg.TxOptions{TxOptions: pgx.TxOptions{IsoLevel: pgx.Serializable}})
	var wg sync.WaitGroup
	results := make([]consumertest.Result, 2)
	for i := range 2 {
		wg.Go(func() {
			results[i] = process(h, consumertest.NewMessage("inc", consumertest.WithID(fmt.Sprintf("inc-%d", i))))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.Outcome != consumer.OutcomeAck {
			t.Fatalf("increment %d: %v (%v), want ack", i, r.Outcome, r.Err)
		}
	}
	if failures.Load() == 0 {
		t.Fatal("no serialization failure happened: the test did not race")
	}
	if b := l.balance(t, "s"); b != 2 {
		t.Fatalf("balance %d, want 2 (no lost update, no double apply)", b)
	}
}

// TestTransactionalOutcomes covers the answers other than a fresh apply.
func TestTransactionalOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t)
	h := dedupepg.Transactional(l.store, l.credit, nil)

	// The handler's error rolls back the dedupe row too: the redelivery runs.
	failing := dedupepg.Transactional(l.store, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		if err := l.credit(ctx, tx, msg); err != nil {
			return err
		}
		return errors.New("downstream said no")
	}, nil)
	if r := process(failing, consumertest.NewMessage("x:1", consumertest.WithID("f-1"))); r.Outcome != consumer.OutcomeRetry {
		t.Fatalf("failing handler: %v, want retry", r.Outcome)
	}
	if b, n := l.balance(t, "x"), l.count(t, "sqsonce_dedupe"); b != 0 || n != 0 {
		t.Fatalf("a failed handler left balance %d and %d dedupe rows", b, n)
	}
	if r := process(h, consumertest.NewMessage("x:1", consumertest.WithID("f-1"))); r.Outcome != consumer.OutcomeAck {
		t.Fatalf("redelivery: %v (%v)", r.Outcome, r.Err)
	}

	// Key reuse: the same id with another body is dead-lettered untouched.
	r := process(h, consumertest.NewMessage("x:999", consumertest.WithID("f-1")))
	var kre *dedupe.KeyReuseError
	if r.Outcome != consumer.OutcomeDeadLetter || r.Class != consumer.ClassKeyReuse || !errors.As(r.Err, &kre) {
		t.Fatalf("key reuse: %v %q (%v)", r.Outcome, r.Class, r.Err)
	}
	if b := l.balance(t, "x"); b != 1 {
		t.Fatalf("balance %d after key reuse, want 1", b)
	}

	// A live lease-mode claim on the key: retried after its lease.
	c, err := l.store.Claim(ctx, "f-2", dedupe.Fingerprint("x:2"), time.Minute)
	if err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("Claim: %+v %v", c, err)
	}
	r = process(h, consumertest.NewMessage("x:2", consumertest.WithID("f-2")))
	if r.Outcome != consumer.OutcomeRetry || r.Delay < 50*time.Second || r.Delay > time.Minute {
		t.Fatalf("in progress: %v after %v (%v), want retry after the lease", r.Outcome, r.Delay, r.Err)
	}
	if err := l.store.Release(ctx, "f-2", c.Token); err != nil {
		t.Fatal(err)
	}
	if r := process(h, consumertest.NewMessage("x:2", consumertest.WithID("f-2"))); r.Outcome != consumer.OutcomeAck {
		t.Fatalf("after release: %v (%v)", r.Outcome, r.Err)
	}
	if b := l.balance(t, "x"); b != 3 {
		t.Fatalf("balance %d, want 3", b)
	}
}

// TestTransactionalTakeoverChecksFingerprint: a lease-mode claim whose
// owner crashed (its lease ended, its effects unknown) still belongs to
// its message: the same key with another body is key reuse, never a
// takeover; the same body takes over.
func TestTransactionalTakeoverChecksFingerprint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t)
	// A worker that claimed the key two minutes ago, for a minute, and
	// crashed.
	crashed, err := dedupepg.New(dedupepg.Config{DB: l.pool, Namespace: "ledger",
		NowFunc: func() time.Time { return time.Now().Add(-2 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := crashed.Claim(ctx, "abandoned", dedupe.Fingerprint("erin:1"), time.Minute); err != nil || c.Status != dedupe.Claimed {
		t.Fatalf("Claim: %+v %v", c, err)
	}
	h := dedupepg.Transactional(l.store, l.credit, nil)
	r := process(h, consumertest.NewMessage("erin:999", consumertest.WithID("abandoned")))
	var kre *dedupe.KeyReuseError
	if r.Outcome != consumer.OutcomeDeadLetter || !errors.As(r.Err, &kre) {
		t.Fatalf("another body after the lease: %v (%v), want key reuse", r.Outcome, r.Err)
	}
	if r := process(h, consumertest.NewMessage("erin:1", consumertest.WithID("abandoned"))); r.Outcome != consumer.OutcomeAck {
		t.Fatalf("the same body after the lease: %v (%v), want ack", r.Outcome, r.Err)
	}
	if b := l.balance(t, "erin"); b != 1 || l.runs.Load() != 1 {
		t.Fatalf("balance %d after %d runs, want 1 after 1", b, l.runs.Load())
	}
}
