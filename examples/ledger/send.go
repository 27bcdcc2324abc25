package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/sqsonce/sqsonce/producer"
)

// sendReport is what `ledger send -json` prints.
type sendReport struct {
	Distinct   int   `json:"distinct"`   // distinct valid credits
	Total      int64 `json:"total"`      // their amounts added up: the balance total to expect
	Duplicates int   `json:"duplicates"` // extra messages repeating a credit's id
	Malformed  int   `json:"malformed"`  // messages that must end in the DLQ
	Messages   int   `json:"messages"`   // messages sent in all
	// NotBefore is the time the credits are due (-not-before), RFC 3339;
	// empty when they are due at once.
	NotBefore string `json:"not_before,omitempty"`
	// Accounts is the balance each account must gain.
	Accounts map[string]int64 `json:"accounts"`
}

// malformedBodies are the kinds of bad message `send -bad-rate` mixes in.
var malformedBodies = []string{
	`{"id":"%s","account":"acct-bad","amount":12.5}`,
	`{"id":"%s","account":"acct-bad","amount":"12"}`,
	`{"id":"%s","account":"","amount":3}`,
	`{"id":"%s","amount":3}`,
	`{"id":"%s","account":"acct-bad","amount":1e3}`,
	`["%s"]`,
	`not json %s`,
	`{"id":"%s","account":"acct-bad","amount":99999999999999999999}`,
}

func cmdSend(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	fs := g.flagSet("send", stderr)
	n := fs.Int("n", 1000, "number of distinct credits")
	accounts := fs.Int("accounts", 10, "number of accounts the credits spread over")
	dupRate := fs.Float64("dup-rate", 0, "fraction of credits sent a second time, as a separate message with the same id")
	badRate := fs.Float64("bad-rate", 0, "malformed messages to add, as a fraction of -n")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	memoBytes := fs.Int("memo-bytes", 0, "add a memo of `N` bytes of text to each credit; a credit too large for a message goes to S3 (the ledger's bucket) behind a pointer")
	compress := fs.Bool("compress", false, "compress credits over 1 KiB with zstd (sqsonce-encoding)")
	notBefore := fs.Duration("not-before", 0, "schedule the credits `D` in the future (e.g. 2h, up to the queue's retention): each is applied at or after its time, once; standard queues only")
	hop := fs.Duration("hop", 0, "for tests and the demo: the longest DelaySeconds of a delayed credit, whole seconds (default 15m, SQS's most); the worker holds it the rest of the way")
	names, c, err := g.open(ctx, fs, args, func() error {
		switch {
		case *n < 0:
			return usagef("send: -n must be ≥ 0")
		case *accounts < 1:
			return usagef("send: -accounts must be ≥ 1")
		case *dupRate < 0 || *dupRate > 1 || math.IsNaN(*dupRate):
			return usagef("send: -dup-rate must be between 0 and 1")
		case *badRate < 0 || *badRate > 1 || math.IsNaN(*badRate):
			return usagef("send: -bad-rate must be between 0 and 1")
		case *memoBytes < 0 || *memoBytes > maxMemoBytes:
			return usagef("send: -memo-bytes must be between 0 and %d", maxMemoBytes)
		case *notBefore < 0:
			return usagef("send: -not-before must not be negative")
		case *hop < 0 || *hop > 15*time.Minute || *hop%time.Second != 0:
			return usagef("send: -hop must be whole seconds up to 15m")
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer c.close()
	queueURL, err := c.queueURL(ctx, names.Queue)
	if err != nil {
		return err
	}

	run := make([]byte, 4)
	_, _ = rand.Read(run)
	prefix := hex.EncodeToString(run)
	rep := sendReport{Accounts: map[string]int64{}}
	var due time.Time
	if *notBefore > 0 {
		due = time.Now().Add(*notBefore).Truncate(time.Millisecond)
		rep.NotBefore = due.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	type outgoing struct {
		id, account, body string
		due               time.Time
	}
	var msgs []outgoing
	for i := range *n {
		id := fmt.Sprintf("credit-%s-%06d", prefix, i)
		account := fmt.Sprintf("acct-%03d", i%*accounts)
		amount := int64(1 + mrand.IntN(1000))
		fields := map[string]any{"id": id, "account": account, "amount": amount}
		if *memoBytes > 0 {
			fields["memo"] = memo(*memoBytes)
		}
		if !due.IsZero() {
			// In the body too: the worker's journal records it beside
			// when the credit was applied (ledger audit).
			fields["not_before"] = rep.NotBefore
		}
		body, _ := json.Marshal(fields)
		msgs = append(msgs, outgoing{id, account, string(body), due})
		rep.Distinct++
		rep.Total += amount
		rep.Accounts[account] += amount
	}
	dups := int(math.Round(float64(*n) * *dupRate))
	for _, i := range mrand.Perm(*n)[:dups] {
		msgs = append(msgs, msgs[i])
	}
	rep.Duplicates = dups
	rep.Malformed = int(math.Round(float64(*n) * *badRate))
	for i := range rep.Malformed {
		id := fmt.Sprintf("bad-%s-%06d", prefix, i)
		msgs = append(msgs, outgoing{id, "acct-bad", fmt.Sprintf(malformedBodies[i%len(malformedBodies)], id), time.Time{}})
	}
	mrand.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	rep.Messages = len(msgs)

	pc := producer.PayloadConfig{S3Client: c.s3, Bucket: names.Bucket}
	if *compress {
		pc.CompressAbove = 1024
	}
	p, err := producer.New(producer.Config{Client: c.sqs, QueueURL: queueURL, Concurrency: 8, Payload: pc, DelayHop: *hop})
	if err != nil {
		return err
	}
	out := make([]producer.Message, len(msgs))
	for i, m := range msgs {
		// The id is the credit's: a duplicate is the same job sent again.
		out[i] = producer.Message{ID: m.id, Body: m.body, NotBefore: m.due}
		if names.FIFO {
			// The group keeps one account's credits in order; a unique
			// deduplication id lets every duplicate through SQS, so that
			// sqsonce's dedupe is what drops it.
			out[i].GroupID = m.account
			out[i].DeduplicationID = fmt.Sprintf("%s-%d", m.id, i)
		}
	}
	for i, r := range p.SendBatch(ctx, out) {
		if r.Err != nil {
			return fmt.Errorf("send credit %s: %w", msgs[i].id, r.Err)
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "sent %d distinct valid credits totalling %d (+%d duplicates, %d malformed; %d messages) to %s\n",
		rep.Distinct, rep.Total, rep.Duplicates, rep.Malformed, rep.Messages, names.Queue)
	if rep.NotBefore != "" {
		fmt.Fprintf(stdout, "the credits are due at %s\n", rep.NotBefore)
	}
	return nil
}

// maxMemoBytes bounds -memo-bytes: the worker's default cap on a body
// (consumer.PayloadConfig.MaxBytes) is 64 MiB.
const maxMemoBytes = 32 << 20

// memoWords are what a memo is written with: text that compresses about
// as well as a person's notes do.
var memoWords = strings.Fields(`invoice payment refund transfer account balance customer order
	shipping tax discount monthly annual settlement fee interest bonus adjustment
	reference note approved pending reviewed by finance team for period ending`)

// memo is n bytes of words, picked at random.
func memo(n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		b.WriteString(memoWords[mrand.IntN(len(memoWords))])
		b.WriteByte(' ')
		if mrand.IntN(8) == 0 {
			fmt.Fprintf(&b, "%d ", mrand.IntN(100000))
		}
	}
	return b.String()[:n]
}
