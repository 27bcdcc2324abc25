package consumer

import (
	"net/http"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
)

// TestPoolOption: the SDK's own HTTP client is swapped for one copy whose
// pool keeps n idle connections per host and every other transport setting;
// a client that keeps n or more, and any other HTTP client, stay. Every
// client is guarded (sdkhttp).
func TestPoolOption(t *testing.T) {
	t.Parallel()
	p := &pool{n: 21}
	def := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.IdleConnTimeout = 7 * time.Second })
	o := sqs.Options{HTTPClient: def}
	p.option(&o)
	inner, guarded := sdkhttp.Unwrap(o.HTTPClient)
	b, ok := inner.(*awshttp.BuildableClient)
	if !guarded || !ok || b == def {
		t.Fatalf("HTTP client %T %p: want a copy of %p", o.HTTPClient, o.HTTPClient, def)
	}
	if tr := b.GetTransport(); tr.MaxIdleConnsPerHost != 21 || tr.IdleConnTimeout != 7*time.Second {
		t.Errorf("copy's transport: %d idle per host, idle timeout %s; want 21 and the client's 7s", tr.MaxIdleConnsPerHost, tr.IdleConnTimeout)
	}
	if got := def.GetTransport().MaxIdleConnsPerHost; got != awshttp.DefaultHTTPTransportMaxIdleConnsPerHost {
		t.Errorf("the client's own pool changed to %d", got)
	}
	first := o.HTTPClient
	o = sqs.Options{HTTPClient: def}
	p.option(&o)
	if o.HTTPClient != first {
		t.Errorf("second call: %v, want the same guarded copy %v", o.HTTPClient, first)
	}
	wide := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.MaxIdleConnsPerHost = 50 })
	custom := &http.Client{}
	for _, c := range []interface {
		Do(*http.Request) (*http.Response, error)
	}{wide, custom} {
		o = sqs.Options{HTTPClient: c}
		p.option(&o)
		if inner, guarded := sdkhttp.Unwrap(o.HTTPClient); !guarded || inner != c {
			t.Errorf("%T with its own pool: got %v, want it guarded as it is", c, o.HTTPClient)
		}
	}
}

// TestPooledWithKeepsCallerOptions: the pool's option goes after the
// caller's, and the caller's slice is not written to.
func TestPooledWithKeepsCallerOptions(t *testing.T) {
	t.Parallel()
	c := newPooledSQS(nil, 21)
	if got := c.with(nil); len(got) != 1 {
		t.Fatalf("no caller options: %d options, want the pool's alone", len(got))
	}
	var order []string
	mine := func(*sqs.Options) { order = append(order, "mine") }
	caller := make([]func(*sqs.Options), 1, 4)
	caller[0] = mine
	got := c.with(caller)
	spare := caller[:2]
	if len(got) != 2 || spare[1] != nil {
		t.Fatalf("with: %d options; the caller's spare capacity holds %p", len(got), spare[1])
	}
	o := sqs.Options{HTTPClient: awshttp.NewBuildableClient()}
	for _, fn := range got {
		fn(&o)
	}
	if len(order) != 1 {
		t.Errorf("the caller's option ran %d times", len(order))
	}
	// A call that guards its client itself (sdkhttp.SQS) still gets the pool.
	o = sqs.Options{HTTPClient: awshttp.NewBuildableClient()}
	for _, fn := range c.with([]func(*sqs.Options){sdkhttp.SQS}) {
		fn(&o)
	}
	if inner, _ := sdkhttp.Unwrap(o.HTTPClient); !pooledTo(inner, 21) {
		t.Errorf("a call guarded by its own option did not get the pool")
	}
	inner, _ := sdkhttp.Unwrap(o.HTTPClient)
	if b, ok := inner.(*awshttp.BuildableClient); !ok || b.GetTransport().MaxIdleConnsPerHost != 21 {
		t.Errorf("the pool's option did not run last")
	}
}

// pooledTo reports whether c is the SDK's client keeping n idle connections
// per host.
func pooledTo(c sdkhttp.Doer, n int) bool {
	b, ok := c.(*awshttp.BuildableClient)
	return ok && b.GetTransport().MaxIdleConnsPerHost == n
}
