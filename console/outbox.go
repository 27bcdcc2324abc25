package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sqsonce/sqsonce/outbox"
)

// outboxData is the outbox page's data.
type outboxData struct {
	Stats     outbox.Stats
	OldestAge time.Duration
	Err       string
	Done      string
}

func (c *Console) outboxPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Outbox == nil {
		c.fail(w, http.StatusNotFound, "outbox", errors.New("this console was given no outbox store"))
		return
	}
	d := outboxData{}
	st, err := c.cfg.Outbox.Stats(r.Context())
	if err != nil {
		d.Err = err.Error()
	}
	d.Stats = st
	if !st.Oldest.IsZero() {
		d.OldestAge = c.now().Sub(st.Oldest)
	}
	// What the last action did: fixed words and a number, never text
	// from the query shown as it came.
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("n"))
	switch q.Get("done") {
	case "requeued":
		d.Done = strconv.Itoa(n) + " dead event(s) made pending again."
	case "discarded":
		d.Done = "The event was discarded."
	}
	c.render(w, http.StatusOK, "outbox", "Outbox", d)
}

// requeueAction makes every dead event pending again (the Store's
// Requeue).
func (c *Console) requeueAction(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Outbox == nil {
		c.fail(w, http.StatusNotFound, "outbox", errors.New("this console was given no outbox store"))
		return
	}
	n, err := c.cfg.Outbox.Requeue(r.Context())
	if err != nil {
		c.fail(w, http.StatusBadGateway, "requeue", err)
		return
	}
	c.audit(r, "outbox-requeue", "", n)
	http.Redirect(w, r, c.link("/outbox?"+url.Values{"done": {"requeued"}, "n": {strconv.Itoa(n)}}.Encode()), http.StatusSeeOther)
}

// discardAction deletes one dead event without publishing it (the
// Store's Discard), once "discard" was typed.
func (c *Console) discardAction(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Outbox == nil {
		c.fail(w, http.StatusNotFound, "outbox", errors.New("this console was given no outbox store"))
		return
	}
	id := r.PostFormValue("event")
	if id == "" || r.PostFormValue("confirm") != "discard" {
		c.fail(w, http.StatusBadRequest, "discard", errors.New(`type "discard" to discard the event: nothing was discarded`))
		return
	}
	if err := c.cfg.Outbox.Discard(r.Context(), id); err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, outbox.ErrNotDead) {
			status = http.StatusConflict
		}
		c.fail(w, status, "discard", err)
		return
	}
	c.audit(r, "outbox-discard", "", 1)
	http.Redirect(w, r, c.link("/outbox?done=discarded"), http.StatusSeeOther)
}
