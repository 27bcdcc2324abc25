package dedupedynamo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupedynamo"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// send is one SQS message to send: body "account:amount", stamped with id.
type send struct{ id, body string }

func sendAll(t testing.TB, client *sqs.Client, queueURL string, msgs []send) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := 0; i < len(msgs); i += 10 {
		batch := msgs[i:min(i+10, len(msgs))]
		g.Go(func() error {
			in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL)}
			for j, m := range batch {
				in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{
					Id:          aws.String(strconv.Itoa(j)),
					MessageBody: aws.String(m.body),
					MessageAttributes: map[string]sqstypes.MessageAttributeValue{
						consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String(m.id)},
					},
				})
			}
			out, err := client.SendMessageBatch(context.Background(), in)
			if err == nil && len(out.Failed) > 0 {
				err = fmt.Errorf("%d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// balances returns every account's balance.
func balances(t *testing.T, client *dynamodb.Client, table string) map[string]int {
	t.Helper()
	got := map[string]int{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		for _, it := range out.Items {
			n, _ := strconv.Atoi(testenv.Scalar(it["balance"]))
			got[testenv.Scalar(it["id"])] = n
		}
	}
	return got
}

// countItems returns how many items a table holds.
func countItems(t *testing.T, client *dynamodb.Client, table string) int {
	t.Helper()
	n := 0
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		n += int(out.Count)
	}
	return n
}

// runConsumer runs a consumer until stop returns true (polled), then
// drains it.
func runConsumer(t *testing.T, cfg consumer.Config, timeout time.Duration, stop func() bool) {
	t.Helper()
	c, err := consumer.New(cfg)
	if err != nil {
		t.Fatalf("consumer.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(timeout)
	for !stop() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("not done after %s", timeout)
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestEndToEnd: 2,000 ids through a real consumer on fauxqs with the
// transactional handler on DynamoDB Local. 20% of the ids are sent twice as
// separate SQS messages; 5% are made visible again (ChangeMessageVisibility
// 0 from a side channel) while their first delivery is still running, so
// two workers hold the same message at once. Every id's credit must be
// applied exactly once.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	const ids, accounts = 2000, 50
	l := newLedger(t)
	sq := testenv.SQS(t)
	queueURL, dlqURL := testenv.QueueWithDLQ(t, sq, "sqsonce-e2e", testenv.QueueOptions{VisibilityTimeout: 10, MaxReceiveCount: 20})

	var msgs []send
	want := map[string]int{}
	wantSum := 0
	for i := range ids {
		amount := i%97 + 1
		account := fmt.Sprintf("acct-%02d", i%accounts)
		m := send{id: fmt.Sprintf("credit-%04d", i), body: fmt.Sprintf("%s:%d", account, amount)}
		msgs = append(msgs, m)
		want[account] += amount
		wantSum += amount
		if i%5 == 0 { // 20%: sent twice
			msgs = append(msgs, m)
		}
	}
	sendAll(t, sq, queueURL, msgs)

	var (
		commits, dups, others atomic.Int64
		mu                    sync.Mutex
		forced                = map[string]chan struct{}{} // SQS MessageId → closed on redelivery
		runsByMsg             = map[string]int{}
		overlaps              atomic.Int64
	)
	credit := func(ctx context.Context, msg *consumer.Message) ([]types.TransactWriteItem, error) {
		mu.Lock()
		runsByMsg[msg.ID]++
		first := runsByMsg[msg.ID] == 1
		n, _ := strconv.Atoi(strings.TrimPrefix(msg.Key(), "credit-"))
		var wait chan struct{}
		if first && n%20 == 7 { // 5%: force a redelivery while this one runs
			wait = make(chan struct{})
			forced[msg.ID] = wait
		} else if ch, ok := forced[msg.ID]; ok && !first {
			delete(forced, msg.ID)
			close(ch)
			overlaps.Add(1)
		}
		mu.Unlock()
		if wait != nil {
			if _, err := sq.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(queueURL), ReceiptHandle: msg.Raw.ReceiptHandle, VisibilityTimeout: 0,
			}); err != nil {
				return nil, err
			}
			select { // hold this delivery until its copy is running too
			case <-wait:
			case <-time.After(3 * time.Second):
			}
		}
		return l.credit(ctx, msg)
	}
	tx := dedupedynamo.Transactional(l.store, credit, nil)
	handler := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		err := tx.Handle(ctx, msg)
		switch {
		case err == nil:
			commits.Add(1)
		case errors.Is(err, consumer.ErrDuplicate):
			dups.Add(1)
		default:
			others.Add(1)
			t.Logf("message %s: %v", msg.Key(), err)
		}
		return err
	})
	sum := func() int {
		s := 0
		for _, b := range balances(t, l.client, l.accounts) {
			s += b
		}
		return s
	}
	start := time.Now()
	runConsumer(t, consumer.Config{
		Client: sq, QueueURL: queueURL, Handler: handler,
		Concurrency: 32, WaitTime: time.Second,
		Backoff: consumer.Backoff{Base: 100 * time.Millisecond, Cap: time.Second},
	}, 75*time.Second, func() bool {
		if sum() != wantSum {
			return false
		}
		visible, inFlight := testenv.Count(t, sq, queueURL)
		return visible == 0 && inFlight == 0
	})
	t.Logf("%d messages (%d ids) in %s: %d committed, %d duplicates, %d other outcomes, %d forced overlaps",
		len(msgs), ids, time.Since(start).Round(time.Millisecond), commits.Load(), dups.Load(), others.Load(), overlaps.Load())

	got := balances(t, l.client, l.accounts)
	for account, w := range want {
		if got[account] != w {
			t.Errorf("%s: balance %d, want %d", account, got[account], w)
		}
	}
	if s := sum(); s != wantSum {
		t.Errorf("sum of balances %d, want %d (the sum over distinct ids)", s, wantSum)
	}
	// A delivery whose visibility lease was lost (the forced redeliveries)
	// may see its commit cancelled client-side after DynamoDB applied it:
	// the records and balances are the truth, the handler's count a bound.
	if c := commits.Load(); c > ids || c < ids-others.Load() {
		t.Errorf("%d transactions committed with %d other outcomes, want %d", c, others.Load(), ids)
	}
	if d := dups.Load(); d+others.Load() < int64(len(msgs)-ids) {
		t.Errorf("%d duplicates acked, want at least %d (one per extra send)", d, len(msgs)-ids)
	}
	if o := overlaps.Load(); o < 50 {
		t.Errorf("only %d of 100 forced redeliveries overlapped their first delivery: the test did not exercise overlap", o)
	}
	if n := countItems(t, l.client, l.dedupe); n != ids {
		t.Errorf("%d dedupe records, want %d", n, ids)
	}
	if v, f := testenv.Count(t, sq, dlqURL); v+f != 0 {
		t.Errorf("%d dead letters, want none", v+f)
	}
}

// Crash window: a worker process is SIGKILLed at a chosen point of the
// transactional commit of one message.
func TestCrashWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		point   string
		wantDup bool // the redelivery is acked as a duplicate
	}{
		{"after-commit", true},   // committed, not deleted
		{"before-commit", false}, // nothing committed
	} {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			l := newLedger(t)
			sq := testenv.SQS(t)
			queueURL, _ := testenv.QueueWithDLQ(t, sq, "sqsonce-crash", testenv.QueueOptions{VisibilityTimeout: 2})
			sendAll(t, sq, queueURL, []send{{id: "crash-1", body: "erin:42"}})

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorker$", "-test.v")
			cmd.Env = append(os.Environ(),
				"SQSONCE_DEDUPE_WORKER=1",
				"SQSONCE_WORKER_QUEUE="+queueURL,
				"SQSONCE_WORKER_DEDUPE="+l.dedupe,
				"SQSONCE_WORKER_ACCOUNTS="+l.accounts,
				"SQSONCE_WORKER_CRASH="+tc.point)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("worker was not killed: %v\n%s", err, out)
			}
			want := 0
			if tc.point == "after-commit" {
				want = 42
			}
			if b := l.balance(t, "erin"); b != want {
				t.Fatalf("after the crash: balance %d, want %d", b, want)
			}

			// A healthy worker gets the redelivery once the visibility
			// timeout passes.
			var results []error
			var mu sync.Mutex
			tx := dedupedynamo.Transactional(l.store, l.credit, nil)
			runConsumer(t, consumer.Config{
				Client: sq, QueueURL: queueURL, WaitTime: time.Second,
				Handler: consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
					err := tx.Handle(ctx, msg)
					mu.Lock()
					results = append(results, err)
					mu.Unlock()
					return err
				}),
			}, 30*time.Second, func() bool {
				visible, inFlight := testenv.Count(t, sq, queueURL)
				mu.Lock()
				defer mu.Unlock()
				return len(results) > 0 && visible == 0 && inFlight == 0
			})
			if len(results) != 1 {
				t.Fatalf("redelivery handled %d times: %v", len(results), results)
			}
			if gotDup := errors.Is(results[0], consumer.ErrDuplicate); gotDup != tc.wantDup || (!tc.wantDup && results[0] != nil) {
				t.Fatalf("redelivery: %v, want duplicate=%v", results[0], tc.wantDup)
			}
			if b := l.balance(t, "erin"); b != 42 {
				t.Fatalf("balance %d, want 42 exactly once", b)
			}
		})
	}
}

// TestHelperWorker is the worker process of TestCrashWindow; it runs only
// when re-executed with SQSONCE_DEDUPE_WORKER=1, and kills itself with
// SIGKILL at SQSONCE_WORKER_CRASH.
func TestHelperWorker(t *testing.T) {
	if os.Getenv("SQSONCE_DEDUPE_WORKER") != "1" {
		t.Skip("the crash test's worker process")
	}
	client := testenv.Dynamo(t)
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: client, Table: os.Getenv("SQSONCE_WORKER_DEDUPE"), Namespace: "ledger"})
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{client: client, accounts: os.Getenv("SQSONCE_WORKER_ACCOUNTS"), store: store}
	point := os.Getenv("SQSONCE_WORKER_CRASH")
	handler := dedupedynamo.Transactional(store, l.credit, nil)
	dedupedynamo.SetTestHook(handler, func(p, key string) {
		if p == point {
			self, _ := os.FindProcess(os.Getpid())
			_ = self.Kill() // SIGKILL: no deferred code, no settle

			select {}
		}
	})
	c, err := consumer.New(consumer.Config{
		Client: testenv.SQS(t), QueueURL: os.Getenv("SQSONCE_WORKER_QUEUE"), WaitTime: time.Second,
		Handler: handler,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = c.Run(ctx)
	t.Fatal("the worker was never killed: no message reached the crash point")
}

// TestLeaseTakeover: in lease mode, a handler that stalls past its lease
// while another worker takes the key over can neither complete nor release
// the new owner's record.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("stalled handler fails=%v", fail), func(t *testing.T) {
			t.Parallel()
			l := newLedger(t)
			ctx := context.Background()
			core, logs := observer.New(zapcore.DebugLevel)
			dd, derr := dedupe.New(dedupe.Config{Store: l.store, Lease: 10 * time.Second, NowFunc: l.clock, Logger: zap.New(core)})
			if derr != nil {
				t.Fatal(derr)
			}
			mw := dd.Wrap
			stalled, resume := make(chan struct{}), make(chan struct{})
			var runs atomic.Int64
			failure := errors.New("stalled handler fails")
			slow := mw(consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				runs.Add(1)
				close(stalled)
				<-resume
				if fail {
					return failure
				}
				return nil
			}))
			inNew, finishNew := make(chan struct{}), make(chan struct{})
			fast := mw(consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				runs.Add(1)
				close(inNew)
				<-finishNew
				return nil
			}))

			slowErr := make(chan error, 1)
			go func() { slowErr <- slow.Handle(ctx, msg("m1", "takeover", "frank:1")) }()
			<-stalled
			// Before the lease ends the redelivery must wait.
			var re *consumer.RetryError
			if err := fast.Handle(ctx, msg("m1", "takeover", "frank:1")); !errors.As(err, &re) {
				t.Fatalf("redelivery within the lease: %v, want RetryAfter", err)
			}
			l.advance(11 * time.Second) // the stalled handler's lease ends
			fastErr := make(chan error, 1)
			go func() { fastErr <- fast.Handle(ctx, msg("m1", "takeover", "frank:1")) }()
			<-inNew
			// The stalled handler finishes now: its Complete / Release must
			// fail and leave the new owner's claim alone.
			close(resume)
			// The stale owner's own result: its completion is refused (the
			// effect may repeat: an error, so the message is not acked as
			// done), or its failure is returned unchanged and its release
			// refused.
			err := <-slowErr
			switch {
			case !fail && !errors.Is(err, dedupe.ErrNotOwner):
				t.Fatalf("stalled handler's completion: %v, want ErrNotOwner", err)
			case fail && err != failure:
				t.Fatalf("stalled handler's failure returned as %v, want the handler's error unchanged", err)
			case fail && logs.FilterMessageSnippet("no longer ours").Filter(loggedErr(dedupe.ErrNotOwner)).Len() != 1:
				t.Fatalf("stalled handler's release was not refused with ErrNotOwner: logs %v", logs.All())
			}
			item := testenv.Item(t, l.client, l.dedupe, l.store.PK("takeover"))
			if testenv.Scalar(item["status"]) != dedupe.StatusInProgress {
				t.Fatalf("the new owner's record was changed by the stale owner: %v", item)
			}
			c, _ := l.store.Claim(ctx, "takeover", dedupe.Fingerprint("frank:1"), time.Second)
			if c.Status != dedupe.InProgress {
				t.Fatalf("after the stale owner finished, a claim got %s: the new owner lost its key", c.Status)
			}
			close(finishNew)
			if err := <-fastErr; err != nil {
				t.Fatalf("new owner: %v", err)
			}
			if err := fast.Handle(ctx, msg("m1", "takeover", "frank:1")); !errors.Is(err, consumer.ErrDuplicate) {
				t.Fatalf("after the new owner completed: %v, want ErrDuplicate", err)
			}
			if n := runs.Load(); n != 2 {
				t.Fatalf("%d handler runs, want 2", n)
			}
		})
	}
}

// loggedErr matches log entries whose error field is target (errors.Is).
func loggedErr(target error) func(observer.LoggedEntry) bool {
	return func(e observer.LoggedEntry) bool {
		for _, f := range e.Context {
			if err, ok := f.Interface.(error); ok && f.Key == "error" && errors.Is(err, target) {
				return true
			}
		}
		return false
	}
}

// TestHeartbeatExtendsLease: inside a real consumer on the local stack, the
// heartbeat keeps extending the DynamoDB lease of a handler that runs for
// four leases, and a lost lease cancels the handler with ErrLeaseLost. The
// clock is real, so the bounds are loose: the lease (3 s) is three
// heartbeat intervals, so a tick may run 2 s late without the lease
// lapsing, while a lease never extended would end long before the
// handler's 12 s. The exact timing is tested under synctest in package
// dedupe.
func TestHeartbeatExtendsLease(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	sq := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, sq, "sqsonce-hb", testenv.QueueOptions{VisibilityTimeout: 10})
	sendAll(t, sq, queueURL, []send{{id: "long", body: "gina:1"}, {id: "lost", body: "gina:2"}})
	ctx := context.Background()
	var (
		mu      sync.Mutex
		checks  []dedupe.Status
		lostErr error
		done    = map[string]bool{}
	)
	handler := consumer.HandlerFunc(func(hctx context.Context, m *consumer.Message) error {
		switch m.Key() {
		case "long": // runs for four leases; the lease must hold throughout
			for range 8 { // every 1.5 s: checks fall at every phase of the ticks
				time.Sleep(1500 * time.Millisecond)
				c, err := l.store.Claim(ctx, "long", dedupe.Fingerprint(m.Body), time.Second)
				if err != nil {
					return err
				}
				mu.Lock()
				checks = append(checks, c.Status)
				mu.Unlock()
			}
		case "lost": // the record disappears under it: the next tick cancels it
			if _, err := l.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(l.dedupe),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: l.store.PK("lost")}}}); err != nil {
				return err
			}
			select {
			case <-hctx.Done():
				mu.Lock()
				if lostErr == nil { // the first delivery's
					lostErr = context.Cause(hctx)
				}
				mu.Unlock()
				return hctx.Err()
			case <-time.After(time.Minute):
			}
		}
		mu.Lock()
		done[m.Key()] = true
		mu.Unlock()
		return nil
	})
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: l.client, Table: l.dedupe, Namespace: "ledger"})
	if err != nil {
		t.Fatal(err)
	}
	l.store = store // real clock: the heartbeat runs on real time
	dd, err := dedupe.New(dedupe.Config{Store: store, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runConsumer(t, consumer.Config{
		Client: sq, QueueURL: queueURL, WaitTime: time.Second, HeartbeatInterval: time.Second,
		Handler:    handler,
		Middleware: []consumer.Middleware{dd.Wrap},
	}, 90*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done["long"] && lostErr != nil
	})
	if len(checks) != 8 {
		t.Fatalf("%d checks, want 8", len(checks))
	}
	for i, s := range checks {
		if s != dedupe.InProgress {
			t.Fatalf("check %d at ~%.1fs: %s, want in_progress (the lease was not kept)", i, 1.5*float64(i+1), s)
		}
	}
	if !errors.Is(lostErr, consumer.ErrLeaseLost) || !errors.Is(lostErr, dedupe.ErrNotOwner) {
		t.Fatalf("lost lease cause: %v, want ErrLeaseLost wrapping ErrNotOwner", lostErr)
	}
}

// settledObserver records each message's results and the LeaseLost events.
type settledObserver struct {
	consumer.NopObserver
	mu      sync.Mutex
	results map[string][]consumer.Result // by MessageId
	lost    []error
	retried chan struct{} // closed on the first in-progress retry
	once    sync.Once
}

func (o *settledObserver) Settled(m *consumer.Message, res consumer.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results[m.ID] = append(o.results[m.ID], res)
	var ip *dedupe.InProgressError
	if errors.As(res.Err, &ip) {
		o.once.Do(func() { close(o.retried) })
	}
}

// longRetry reports a retry after more than 2 s.
func (o *settledObserver) longRetry() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range o.results {
		for _, r := range rs {
			if r.Outcome == consumer.OutcomeRetry && r.Delay > 2*time.Second {
				return true
			}
		}
	}
	return false
}

func (o *settledObserver) LeaseLost(_ *consumer.Message, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lost = append(o.lost, err)
}

// TestOverlappingDuplicateSettlesSoon: two copies of one job (same
// sqsonce-id) run by a consumer on the local stack with lease-mode dedupe
// on DynamoDB Local and the default 1-minute lease. The first copy's
// handler holds on until the second copy has found the key in progress;
// that copy is retried after 1 s (its first receive), not after the
// remaining lease, finds the record completed and is acked as a
// duplicate: the handler runs once and both copies settle long before the
// lease would have ended.
func TestOverlappingDuplicateSettlesSoon(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	sq := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, sq, "sqsonce-overlap", testenv.QueueOptions{VisibilityTimeout: 30})
	sendAll(t, sq, queueURL, []send{{id: "overlap-1", body: "judy:1"}, {id: "overlap-1", body: "judy:1"}})
	obs := &settledObserver{results: map[string][]consumer.Result{}, retried: make(chan struct{})}
	store, err := dedupedynamo.New(dedupedynamo.Config{Client: l.client, Table: l.dedupe, Namespace: "ledger"})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	handler := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		runs.Add(1)
		select { // hold on until the other copy has overlapped
		case <-obs.retried:
		case <-time.After(20 * time.Second):
		}
		return nil
	})
	dd, err := dedupe.New(dedupe.Config{Store: store, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runConsumer(t, consumer.Config{
		Client: sq, QueueURL: queueURL, WaitTime: time.Second, Concurrency: 2, Observer: obs,
		Handler:    handler,
		Middleware: []consumer.Middleware{dd.Wrap},
	}, 45*time.Second, func() bool {
		if obs.longRetry() {
			return true // reported below
		}
		visible, inFlight := testenv.Count(t, sq, queueURL)
		return visible == 0 && inFlight == 0
	})
	t.Logf("stopped after %s", time.Since(start).Round(time.Millisecond))

	obs.mu.Lock()
	defer obs.mu.Unlock()
	var acks, dups, retries int
	for id, rs := range obs.results {
		for _, r := range rs {
			switch r.Outcome {
			case consumer.OutcomeAck:
				acks++
			case consumer.OutcomeDuplicate:
				dups++
			case consumer.OutcomeRetry:
				retries++
				if r.Delay > 2*time.Second {
					t.Errorf("message %s retried after %s, want a short backoff (1 s on the first receive), not the lease", id, r.Delay)
				}
			}
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if acks != 1 || dups != 1 || retries < 1 {
		t.Fatalf("%d acks, %d duplicates, %d in-progress retries: want 1, 1 and at least 1 (%v)", acks, dups, retries, obs.results)
	}
	if len(obs.lost) != 0 {
		t.Fatalf("LeaseLost events %v, want none", obs.lost)
	}
}
