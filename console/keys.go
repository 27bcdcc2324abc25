package console

import (
	"errors"
	"net/http"
	"slices"

	"github.com/sqsonce/sqsonce/idempotency"
)

// keysData is the key page's data.
type keysData struct {
	Scope, Key string
	Looked     bool
	Found      bool
	Record     idempotency.Record
	Headers    []string
	Err        string
}

// keysPage looks up a caller's Idempotency-Key: the record of (scope,
// key) as the middleware stores it (idempotency.RecordKey), read without
// claiming it. The lookup is a POST, so that keys stay out of URLs and
// access logs; it changes nothing, and read-only consoles offer it too.
func (c *Console) keysPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Keys == nil {
		c.fail(w, http.StatusNotFound, "keys", errors.New("this console was given no idempotency store"))
		return
	}
	d := keysData{}
	if r.Method == http.MethodPost {
		d.Scope, d.Key, d.Looked = r.PostFormValue("scope"), r.PostFormValue("key"), true
		rec, err := c.cfg.Keys.Lookup(r.Context(), idempotency.RecordKey(d.Scope, d.Key))
		switch {
		case errors.Is(err, idempotency.ErrNoRecord):
		case err != nil:
			d.Err = err.Error()
		default:
			d.Found, d.Record = true, rec
			if rec.Response != nil {
				for h := range rec.Response.Header {
					d.Headers = append(d.Headers, h)
				}
				slices.Sort(d.Headers)
			}
		}
		c.audit(r, "key-lookup", "", btoi(d.Found))
	}
	c.render(w, http.StatusOK, "keys", "Idempotency keys", d)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
