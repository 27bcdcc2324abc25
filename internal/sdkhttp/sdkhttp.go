// Package sdkhttp keeps the AWS SDK's HTTP calls from losing responses to
// a race between the SDK's request body and net/http.
//
// The SDK (smithy-go) hands net/http a request body that implements
// io.WriterTo and, once closed, answers WriteTo with io.EOF. It closes the
// body as soon as the call's response headers are in. net/http writes a
// request in its own goroutine and, after the Content-Length bytes, drains
// whatever is left of the body: through WriteTo, whose io.EOF it takes as
// a failed write. When that goroutine runs late (a busy CPU), the response
// has already arrived and the body is closed, so the write "fails" and
// net/http closes the connection, often while the response body is still
// being read. The SDK then retries the call: for ReceiveMessage the first
// response's messages are lost until their visibility timeout ends (and
// their receive count went up), a SendMessage may be sent twice, and every
// such call opens a new connection (a TLS handshake, on AWS).
//
// A body that only reads and closes is drained through Read, where a
// closed body's io.EOF is the normal end, so the connection is kept and
// the response read whole.
//
// Guard goes one step further: it copies the body (which the SDK holds in
// memory anyway) into a reader net/http knows is in memory. net/http then
// writes the request's headers and body in one write. For any other body
// it flushes the headers on their own first, so every SDK call took two
// writes, two TCP segments (two TLS records on AWS), and woke the server
// twice. Only bodies of up to MaxBuffered bytes are copied; a larger one
// is guarded as GuardDrain does.
package sdkhttp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Doer is the SDK's HTTP client interface (sqs.HTTPClient,
// sns.HTTPClient, dynamodb.HTTPClient). The DynamoDB client's per-call
// option is package dynamohttp's, so that only programs using DynamoDB
// link its SDK.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// MaxBuffered is the largest request body Guard copies: DynamoDB's
// largest request (TransactWriteItems, 4 MB) fits.
const MaxBuffered = 4 << 20

// Guard returns c making every request with a body of up to MaxBuffered
// bytes from a copy of it in memory, written with the headers, and every
// larger one with a body that hides WriteTo. It returns c itself when c
// is already guarded, and upgrades a client GuardDrain made.
func Guard(c Doer) Doer {
	switch g := c.(type) {
	case nil, guarded:
		return c
	case drained:
		return guarded(g)
	}
	return guarded{next: c}
}

// GuardDrain returns c making every request with a body that hides
// WriteTo, and nothing more: it writes a request as the SDK does (headers,
// then body), without the race. It returns c itself when c is already
// guarded, either way.
func GuardDrain(c Doer) Doer {
	switch c.(type) {
	case nil, guarded, drained:
		return c
	}
	return drained{next: c}
}

type guarded struct{ next Doer }

func (g guarded) Do(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > MaxBuffered {
		return drained(g).Do(r)
	}
	// Not pooled: net/http may still read a body after Do returned.
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		r.Body.Close() // as net/http closes a body on every error
		return nil, fmt.Errorf("sdkhttp: reading the request body (%d bytes): %w", r.ContentLength, err)
	}
	// The SDK closes its own body once the call is over.
	r.Body = io.NopCloser(bytes.NewReader(buf))
	return g.next.Do(r)
}

type drained struct{ next Doer }

func (d drained) Do(r *http.Request) (*http.Response, error) {
	if _, ok := r.Body.(io.WriterTo); ok && r.Body != http.NoBody {
		r.Body = readCloser{r.Body}
	}
	return d.next.Do(r)
}

// readCloser is an io.ReadCloser and nothing more.
type readCloser struct{ io.ReadCloser }

// Unwrap returns the client c guards, and whether c is guarded (by Guard
// or GuardDrain).
func Unwrap(c Doer) (Doer, bool) {
	switch g := c.(type) {
	case guarded:
		return g.next, true
	case drained:
		return g.next, true
	}
	return c, false
}

// SQS is a per-call option that guards the call's HTTP client.
func SQS(o *sqs.Options) { o.HTTPClient = Guard(o.HTTPClient) }

// SNS is a per-call option that guards the call's HTTP client.
func SNS(o *sns.Options) { o.HTTPClient = Guard(o.HTTPClient) }
