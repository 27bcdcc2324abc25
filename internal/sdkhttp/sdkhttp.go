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
package sdkhttp

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Doer is the SDK's HTTP client interface (sqs.HTTPClient,
// dynamodb.HTTPClient).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Guard returns c making every request with a body that hides WriteTo.
// It returns c itself when c is already guarded.
func Guard(c Doer) Doer {
	if _, ok := c.(guarded); ok || c == nil {
		return c
	}
	return guarded{next: c}
}

type guarded struct{ next Doer }

func (g guarded) Do(r *http.Request) (*http.Response, error) {
	if _, ok := r.Body.(io.WriterTo); ok && r.Body != http.NoBody {
		r.Body = readCloser{r.Body}
	}
	return g.next.Do(r)
}

// readCloser is an io.ReadCloser and nothing more.
type readCloser struct{ io.ReadCloser }

// Unwrap returns the client c guards, and whether c is guarded.
func Unwrap(c Doer) (Doer, bool) {
	g, ok := c.(guarded)
	if !ok {
		return c, false
	}
	return g.next, true
}

// SQS is a per-call option that guards the call's HTTP client.
func SQS(o *sqs.Options) { o.HTTPClient = Guard(o.HTTPClient) }

// DynamoDB is a per-call option that guards the call's HTTP client.
func DynamoDB(o *dynamodb.Options) { o.HTTPClient = Guard(o.HTTPClient) }
