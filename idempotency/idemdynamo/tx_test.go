package idemdynamo_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemdynamo"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// api is a key table, a credits table, and a middleware over them whose
// clock the test moves.
type api struct {
	client  *dynamodb.Client
	keys    string
	credits string
	store   *idemdynamo.Store
	clock   *dedupetest.Clock
}

func newAPI(t *testing.T) *api {
	t.Helper()
	client, keys := newTable(t)
	a := &api{client: client, keys: keys, credits: testenv.Table(t, client, "sqsonce-credits", "id", ""),
		clock: dedupetest.NewClock(time.Now().Truncate(time.Millisecond))}
	s, err := idemdynamo.New(idemdynamo.Config{Client: client, Table: keys, Namespace: "api", NowFunc: a.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	a.store = s
	return a
}

func (a *api) middleware(t *testing.T) *idempotency.Middleware {
	t.Helper()
	m, err := idempotency.New(idempotency.Config{
		Store:     a.store,
		ScopeFunc: func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
		Lease:     30 * time.Second,
		NowFunc:   a.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// putCredit is the write a handler hands to the middleware: a new credit,
// which must not exist yet.
func (a *api) putCredit(id string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(a.credits),
		Item: map[string]types.AttributeValue{
			"id":     &types.AttributeValueMemberS{Value: id},
			"amount": &types.AttributeValueMemberN{Value: "5"},
		},
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	}}
}

func (a *api) credit(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := a.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(a.credits), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// record reads the key record of key for caller "alice".
func (a *api) record(t *testing.T, key string) map[string]types.AttributeValue {
	t.Helper()
	return testenv.Item(t, a.client, a.keys, a.store.PK(idempotency.RecordKey("alice", key)))
}

func send(h http.Handler, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(body))
	r.Header.Set(idempotency.HeaderKey, key)
	r.Header.Set("Authorization", "alice")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestTransactionalCompletion: the handler's write and the completed
// record holding its response commit together; the replay writes nothing.
func TestTransactionalCompletion(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	var runs atomic.Int64
	h := a.middleware(t).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("credit-%d", runs.Add(1))
		if err := idemdynamo.Transact(r.Context(), a.putCredit(id)); err != nil {
			t.Errorf("Transact: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"credit_id":%q}`, id)
	}))
	first := send(h, "k1", `{"amount":5}`)
	if first.Code != http.StatusCreated || first.Body.String() != `{"credit_id":"credit-1"}` {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	if a.credit(t, "credit-1") == nil {
		t.Fatal("the handler's write is not in DynamoDB")
	}
	rec := a.record(t, "k1")
	if testenv.Scalar(rec["status"]) != "COMPLETED" || testenv.Scalar(rec["response_status"]) != "201" {
		t.Fatalf("key record: %v", rec)
	}
	if b, _ := rec["response_body"].(*types.AttributeValueMemberB); b == nil || string(b.Value) != first.Body.String() {
		t.Fatalf("stored body %v, want %s", rec["response_body"], first.Body)
	}
	again := send(h, "k1", `{"amount":5}`)
	if again.Code != http.StatusCreated || again.Body.String() != first.Body.String() || again.Header().Get(idempotency.HeaderReplayed) != "true" ||
		again.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("replay: %d %s %v", again.Code, again.Body, again.Header())
	}
	if runs.Load() != 1 || a.credit(t, "credit-2") != nil {
		t.Fatalf("runs %d: the replay wrote again", runs.Load())
	}
}

// TestTransactionalCommitsNeither: a condition failing on the handler's
// write cancels the whole transaction: no credit, no completed record (the
// key is released), and the client gets a 409 problem instead of the
// handler's 201. The retry runs and commits both.
func TestTransactionalCommitsNeither(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	ctx := context.Background()
	if _, err := a.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(a.credits), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: "taken"}, "amount": &types.AttributeValueMemberN{Value: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	h := a.middleware(t).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "taken"
		if runs.Add(1) > 1 {
			id = "fresh"
		}
		// Two writes: the first would succeed alone.
		if err := idemdynamo.Transact(r.Context(), a.putCredit("side-"+id), a.putCredit(id)); err != nil {
			t.Errorf("Transact: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, id)
	}))
	w := send(h, "k1", "x")
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), idempotency.TypeWriteConflict) {
		t.Fatalf("failed commit: %d %s, want 409 %s", w.Code, w.Body, idempotency.TypeWriteConflict)
	}
	if item := a.credit(t, "side-taken"); item != nil {
		t.Fatalf("a write of the cancelled transaction committed: %v", item)
	}
	if n := a.credit(t, "taken")["amount"]; testenv.Scalar(n) != "1" {
		t.Fatalf("the existing item changed: %v", n)
	}
	if rec := a.record(t, "k1"); rec != nil {
		t.Fatalf("key record after a cancelled commit: %v, want none (released)", rec)
	}
	if w := send(h, "k1", "x"); w.Code != http.StatusCreated || w.Body.String() != "fresh" {
		t.Fatalf("retry: %d %s", w.Code, w.Body)
	}
	if a.credit(t, "fresh") == nil || a.credit(t, "side-fresh") == nil || testenv.Scalar(a.record(t, "k1")["status"]) != "COMPLETED" {
		t.Fatal("the retry's writes and record did not commit together")
	}
}

// TestTransactionalStaleOwner: an owner whose lease was taken over cannot
// commit: its writes do not reach DynamoDB and the new owner's response
// stays stored.
func TestTransactionalStaleOwner(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	m := a.middleware(t)
	started, proceed := make(chan struct{}), make(chan struct{})
	stale := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-proceed
		if err := idemdynamo.Transact(r.Context(), a.putCredit("stale")); err != nil {
			t.Errorf("Transact: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "stale")
	}))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- send(stale, "k1", "x") }()
	<-started
	// The owner stalls past its lease (no extension reaches the store in
	// time); a retry takes the key over and commits.
	a.clock.Advance(31 * time.Second)
	fresh := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := idemdynamo.Transact(r.Context(), a.putCredit("fresh")); err != nil {
			t.Errorf("Transact: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "fresh")
	}))
	if w := send(fresh, "k1", "x"); w.Code != http.StatusCreated || w.Body.String() != "fresh" {
		t.Fatalf("takeover: %d %s", w.Code, w.Body)
	}
	close(proceed)
	w := <-done
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), idempotency.TypeLeaseLost) {
		t.Fatalf("stale owner: %d %s, want 409 %s", w.Code, w.Body, idempotency.TypeLeaseLost)
	}
	if a.credit(t, "stale") != nil {
		t.Fatal("the stale owner's write committed")
	}
	if b, _ := a.record(t, "k1")["response_body"].(*types.AttributeValueMemberB); b == nil || string(b.Value) != "fresh" {
		t.Fatalf("stored body %v, want the new owner's", b)
	}
}

// TestConcurrentRetries: clients race one key over real connections while
// the first request runs: one execution, one credit in DynamoDB, 409s with
// Retry-After for the others, and replays afterwards.
func TestConcurrentRetries(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	var runs atomic.Int64
	started, finish := make(chan struct{}, 100), make(chan struct{})
	srv := httptest.NewServer(a.middleware(t).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("credit-%d", runs.Add(1))
		started <- struct{}{}
		<-finish
		if err := idemdynamo.Transact(r.Context(), a.putCredit(id)); err != nil {
			t.Errorf("Transact: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, id)
	})))
	defer srv.Close()
	send := func() (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/credits", strings.NewReader("x"))
		req.Header.Set(idempotency.HeaderKey, "same")
		req.Header.Set("Authorization", "alice")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Errorf("post: %v", err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header.Get("Retry-After")
	}
	const n = 10
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			code, _, ra := send()
			if code == http.StatusConflict && ra == "" {
				t.Errorf("409 without Retry-After")
			}
			codes <- code
		})
	}
	<-started
	count := map[int]int{}
	for range n - 1 {
		count[<-codes]++
	}
	close(finish)
	wg.Wait()
	count[<-codes]++
	if count[http.StatusCreated] != 1 || count[http.StatusConflict] != n-1 || runs.Load() != 1 {
		t.Fatalf("statuses %v, runs %d: want one 201 and %d 409s", count, runs.Load(), n-1)
	}
	if code, body, _ := send(); code != http.StatusCreated || body != "credit-1" {
		t.Fatalf("replay: %d %q", code, body)
	}
	if a.credit(t, "credit-1") == nil || a.credit(t, "credit-2") != nil {
		t.Fatal("want exactly one credit in DynamoDB")
	}
}

// TestResponseTooLargeForItem: a response past DynamoDB's item limit (the
// middleware's cap raised above it) is delivered; the record is completed
// without it, so the retry learns its status and does not run again.
func TestResponseTooLargeForItem(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	m, err := idempotency.New(idempotency.Config{
		Store:            a.store,
		ScopeFunc:        func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
		MaxResponseBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	big := strings.Repeat("x", 500<<10)
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Location", "/exports/1")
		io.WriteString(w, big)
	}))
	if w := send(h, "k1", ""); w.Code != http.StatusOK || w.Body.Len() != len(big) {
		t.Fatalf("%d, %d bytes", w.Code, w.Body.Len())
	}
	w := send(h, "k1", "")
	if runs.Load() != 1 {
		t.Fatalf("retry: %d, %d bytes after %d runs; the request ran again", w.Code, w.Body.Len(), runs.Load())
	}
	if typ, _ := problemOf(t, w); w.Code != http.StatusOK || typ != idempotency.TypeNotRetained ||
		w.Header().Get(idempotency.HeaderReplayed) != "true" || w.Header().Get("Location") != "/exports/1" {
		t.Fatalf("retry: %d %s %v, want the not-retained replay", w.Code, typ, w.Header())
	}
	if m.Count(idempotency.OutcomeNotStored) != 1 {
		t.Fatalf("not_stored %d", m.Count(idempotency.OutcomeNotStored))
	}
}
