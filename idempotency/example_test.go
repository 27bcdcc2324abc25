package idempotency_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sqsonce/sqsonce/idempotency"
)

// do sends one POST through h and prints what the client sees.
func do(h http.Handler, key, body string) {
	r := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer alice")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	out := strings.TrimSpace(w.Body.String())
	if w.Header().Get("Content-Type") == idempotency.ProblemContentType {
		out = w.Header().Get("Content-Type") // the problem's JSON is long; its type is in each case's doc
	}
	fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), out)
}

// A POST retried with the same key runs once; the retry gets the stored
// response, marked Idempotent-Replayed. The same key with another body is
// refused with 422, and a POST without a key with 400.
func ExampleMiddleware_Wrap() {
	mw, err := idempotency.New(idempotency.Config{
		Store: idempotency.NewMemory(idempotency.MemoryConfig{}),
		ScopeFunc: func(r *http.Request) (string, error) {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				return "", errors.New("unauthenticated")
			}
			return token, nil
		},
		Lease: 10 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	n := 0
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"credit_id":"c-%d","request":%s}`, n, body)
	}))
	do(h, "8e03978e", `{"amount":5}`)
	do(h, "8e03978e", `{"amount":5}`)
	do(h, `"8e03978e"`, `{"amount":5}`) // the quoted form is the same key
	do(h, "8e03978e", `{"amount":6}`)
	do(h, "", `{"amount":5}`)
	fmt.Println("handler runs:", n)
	// Output:
	// 201  {"credit_id":"c-1","request":{"amount":5}}
	// 201 true {"credit_id":"c-1","request":{"amount":5}}
	// 201 true {"credit_id":"c-1","request":{"amount":5}}
	// 422  application/problem+json
	// 400  application/problem+json
	// handler runs: 1
}

// A handler that rejects a request releases its key: the response is sent
// but not stored, so the client can correct the body and retry with the
// same key.
func ExampleRelease() {
	mw, err := idempotency.New(idempotency.Config{
		Store:     idempotency.NewMemory(idempotency.MemoryConfig{}),
		ScopeFunc: func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
	})
	if err != nil {
		panic(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), "amount") {
			idempotency.Release(r.Context())
			http.Error(w, "amount is required", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "credited")
	}))
	do(h, "k-1", `{}`)
	do(h, "k-1", `{"amount":5}`)
	do(h, "k-1", `{"amount":5}`)
	// Output:
	// 400  amount is required
	// 201  credited
	// 201 true credited
}

// By default the body is compared byte for byte: a client that writes the
// same JSON with its keys in another order gets 422. With
// CanonicalJSONFingerprint it gets the stored response; another value is
// still another request.
func ExampleCanonicalJSONFingerprint() {
	mw, err := idempotency.New(idempotency.Config{
		Store:           idempotency.NewMemory(idempotency.MemoryConfig{}),
		ScopeFunc:       func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
		FingerprintFunc: idempotency.CanonicalJSONFingerprint,
	})
	if err != nil {
		panic(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "paid")
	}))
	do(h, "p-1", `{"amount":5,"currency":"EUR"}`)
	do(h, "p-1", `{ "currency": "EUR", "amount": 5 }`)
	do(h, "p-1", `{"amount":6,"currency":"EUR"}`)
	// Output:
	// 201  paid
	// 201 true paid
	// 422  application/problem+json
}
