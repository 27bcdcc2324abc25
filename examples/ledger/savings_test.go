package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sqsonce/sqsonce/internal/payload"
)

// TestCompressionSavings prints what -compress saves on the ledger's
// credits with a memo of 10 KiB and of 200 KiB: the bytes sent through
// SQS and the requests SQS bills (every 64 KiB of a message is billed
// as one request), averaged over 20 credits. These are the figures of
// docs/large-messages.md:
//
//	go test -run TestCompressionSavings -v ./examples/ledger/
func TestCompressionSavings(t *testing.T) {
	const n = 20
	const chunk = 64 << 10
	// sqsonce-id (a credit id) on both; sqsonce-encoding: zstd on the
	// compressed ones.
	idAttr := len("sqsonce-id") + len("String") + len("credit-0123abcd-000000")
	encAttr := len(payload.AttrEncoding) + len("String") + len(payload.EncodingZstd)
	for _, memoBytes := range []int{10 << 10, 200 << 10} {
		var plainBytes, zBytes, plainReqs, zReqs int
		var plainSizes, zSizes []int
		for i := range n {
			body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("credit-0123abcd-%06d", i), "account": "acct-001", "amount": 42, "memo": memo(memoBytes)})
			plain := len(body) + idAttr
			z, ok := payload.Compress(string(body))
			if !ok {
				t.Fatalf("a %d-byte credit did not shrink", len(body))
			}
			// What the consumer gets back is the credit as sent.
			if back, err := payload.Decompress(z, 0); err != nil || back != string(body) {
				t.Fatalf("round trip: %v", err)
			}
			compressed := len(z) + idAttr + encAttr
			plainSizes, zSizes = append(plainSizes, plain), append(zSizes, compressed)
			plainBytes += plain
			zBytes += compressed
			plainReqs += (plain + chunk - 1) / chunk
			zReqs += (compressed + chunk - 1) / chunk
		}
		t.Logf("memo %3d KiB: %7d → %6d bytes a credit (%.1f×, %2.0f%% saved); %.2f → %.2f billed requests a send (%.0f%% saved)",
			memoBytes>>10, plainBytes/n, zBytes/n, float64(plainBytes)/float64(zBytes), 100*(1-float64(zBytes)/float64(plainBytes)),
			float64(plainReqs)/n, float64(zReqs)/n, 100*(1-float64(zReqs)/float64(plainReqs)))
		t.Logf("memo %3d KiB, sent in SendMessageBatch calls as the producer cuts them (10 entries, 1 MiB): %.2f → %.2f billed requests a credit",
			memoBytes>>10, float64(batchedRequests(plainSizes))/n, float64(batchedRequests(zSizes))/n)
		if zBytes >= plainBytes || zReqs > plainReqs {
			t.Errorf("compression sent more: %d bytes, %d requests against %d, %d", zBytes, zReqs, plainBytes, plainReqs)
		}
	}
}

// batchedRequests is what SQS bills for sending messages of these sizes
// in SendMessageBatch calls cut as the producer cuts them (at most 10
// entries and 1 MiB a call): every 64 KiB of a call is a request.
func batchedRequests(sizes []int) int {
	reqs, n, size := 0, 0, 0
	flush := func() {
		if n > 0 {
			reqs += (size + 64<<10 - 1) / (64 << 10)
		}
		n, size = 0, 0
	}
	for _, s := range sizes {
		if n == 10 || size+s > 1<<20 {
			flush()
		}
		n++
		size += s
	}
	flush()
	return reqs
}
