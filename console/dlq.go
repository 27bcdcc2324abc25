package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/redrive"
)

// dlqState is what the console knows of one DLQ.
type dlqState struct {
	// read is held by whatever passes over the DLQ (a page's read, a dry
	// run, an export, a job): two passes at once would each see only the
	// messages the other does not hold.
	read sync.Mutex

	// Guarded by Console.mu.
	snap *snapshot // the last read, nil when none or stale
	job  string    // the running job's id, "" when none
}

// snapshot is one read of a DLQ: every message it handed out, up to
// PageSize, all visible again by the time it is kept.
type snapshot struct {
	dlq     redrive.Queue
	sources []redrive.Queue
	entries []redrive.Entry
	readAt  time.Time
	took    time.Duration
}

// snapshotTTL is how long a read serves the page (its filters, its
// message details) before the next view reads again.
const snapshotTTL = 30 * time.Second

// state returns the DLQ's state, made on first use.
func (c *Console) state(name string) *dlqState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.queues[name]
	if !ok {
		st = &dlqState{}
		c.queues[name] = st
	}
	return st
}

// errNotDLQ: the console reads only dead-letter queues.
var errNotDLQ = errors.New("not a dead-letter queue: no queue's RedrivePolicy names it, and the console reads only DLQs (reading takes messages in flight, which a queue's consumers would miss)")

// errOutside: the queue is outside the console's prefix.
var errOutside = errors.New("outside this console's queue prefix")

// resolve resolves a DLQ by name, with its sources, and checks that the
// console may read it: it is a DLQ, and it or one of its sources has the
// console's prefix.
func (c *Console) resolve(ctx context.Context, name string) (redrive.Queue, []redrive.Queue, error) {
	if strings.ContainsAny(name, "/:") {
		return redrive.Queue{}, nil, fmt.Errorf("%w: %q is not a queue name", redrive.ErrUnknownQueue, name)
	}
	q, err := c.r.Queue(ctx, name)
	if err != nil {
		return q, nil, err
	}
	srcs, err := c.r.Sources(ctx, q)
	if err != nil {
		return q, nil, err
	}
	if len(srcs) == 0 {
		return q, nil, errNotDLQ
	}
	if p := c.cfg.QueuePrefix; p != "" && !strings.HasPrefix(q.Name, p) && !slices.ContainsFunc(srcs, func(s redrive.Queue) bool { return strings.HasPrefix(s.Name, p) }) {
		return q, nil, errOutside
	}
	return q, srcs, nil
}

// read returns a fresh snapshot of the DLQ, reading it when the last one
// is stale (or reread is set). It returns busy=true, with the last
// snapshot (maybe nil), while a job holds the DLQ: the page does not wait
// for a move.
func (c *Console) read(ctx context.Context, name string, reread bool) (snap *snapshot, busy string, err error) {
	st := c.state(name)
	c.mu.Lock()
	snap, busy = st.snap, st.job
	c.mu.Unlock()
	if busy != "" {
		return snap, busy, nil
	}
	if snap != nil && !reread && c.now().Sub(snap.readAt) < snapshotTTL {
		return snap, "", nil
	}
	st.read.Lock()
	defer st.read.Unlock()
	c.mu.Lock()
	snap, busy = st.snap, st.job
	c.mu.Unlock()
	if busy != "" {
		return snap, busy, nil
	}
	if snap != nil && !reread && c.now().Sub(snap.readAt) < snapshotTTL {
		return snap, "", nil // read by the request we waited for
	}
	q, srcs, err := c.resolve(ctx, name)
	if err != nil {
		return nil, "", err
	}
	start := time.Now()
	// Read at most what SQS counts in the queue (when it gives counts): a
	// read that has them all ends without the long poll that would find
	// nothing more. A message that arrives meanwhile shows on the next
	// read; an empty DLQ is not read at all.
	limit := c.cfg.PageSize
	if q.Messages >= 0 && q.InFlight >= 0 {
		limit = min(limit, q.Messages+q.InFlight)
	}
	var entries []redrive.Entry
	if limit > 0 {
		if entries, err = c.r.Peek(ctx, q, redrive.PeekOptions{Max: limit}); err != nil {
			return nil, "", err
		}
	}
	snap = &snapshot{dlq: q, sources: srcs, entries: entries, readAt: c.now(), took: time.Since(start)}
	c.mu.Lock()
	st.snap = snap
	c.mu.Unlock()
	return snap, "", nil
}

// forget drops a DLQ's snapshot: an action changed it.
func (c *Console) forget(name string) {
	st := c.state(name)
	c.mu.Lock()
	st.snap = nil
	c.mu.Unlock()
	c.ov.mu.Lock()
	c.ov.rows = nil
	c.ov.mu.Unlock()
}

// filterForm is a DLQ page's filters, as the query carries them.
type filterForm struct {
	Class, Reason, Older, Newer, Source, Group string
	Expr                                       []string
}

// formFrom reads the filters of a query or a form.
func formFrom(v url.Values) filterForm {
	f := filterForm{Class: v.Get("class"), Reason: v.Get("reason"), Older: v.Get("older"), Newer: v.Get("newer"),
		Source: v.Get("source"), Group: v.Get("group")}
	for _, e := range v["expr"] {
		if e = strings.TrimSpace(e); e != "" {
			f.Expr = append(f.Expr, e)
		}
	}
	return f
}

// exprs returns the filters as redrive filter expressions: what the
// actions' forms carry and redrive parses.
func (f filterForm) exprs() []string {
	var out []string
	add := func(prefix, v string) {
		if v != "" {
			out = append(out, prefix+v)
		}
	}
	add("class=", f.Class)
	add("error=", f.Reason)
	add("age>", f.Older)
	add("age<", f.Newer)
	add("source=", f.Source)
	add("group=", f.Group)
	return append(out, f.Expr...)
}

// group is the dead letters of one class and reason.
type group struct {
	Class, Reason string
	Count         int
	First, Last   time.Time
	Sources       []string
	Link          string // the DLQ page filtered to this group
}

// row is one dead letter in a DLQ page's list.
type row struct {
	ID, Class, Reason, Source, SourceName, Group string
	Attempts                                     int
	Age                                          time.Duration
	At                                           time.Time
	Link                                         string
}

// dlqData is a DLQ page's data.
type dlqData struct {
	Name       string
	FIFO       bool
	Messages   int
	InFlight   int
	Sources    []string
	Read       int
	Truncated  bool
	PageSize   int
	ReadAt     time.Time
	Took       string
	Visibility string
	Busy       string // the running job's link, when one holds the DLQ
	Groups     []group
	Rows       []row
	Filter     filterForm
	Filters    []string // as expressions, for the action forms
	FilterErr  string
	Classes    []string
	SourceOpts []string
	Base       string
	CanDelete  bool
	Reread     string
}

func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	snap, busy, err := c.read(r.Context(), name, r.URL.Query().Get("reread") != "")
	if err != nil {
		c.failQueue(w, name, err)
		return
	}
	base := c.link("/dlq/" + url.PathEscape(name))
	d := dlqData{Name: name, PageSize: c.cfg.PageSize, Visibility: c.r.VisibilityTimeout().String(), Base: base,
		CanDelete: c.cfg.BackupDir != "", Reread: base + "?reread=1"}
	if busy != "" {
		d.Busy = c.link("/jobs/" + busy)
	}
	form := formFrom(r.URL.Query())
	d.Filter = form
	d.Filters = form.exprs()
	filters, ferr := redrive.ParseFilters(d.Filters...)
	if ferr != nil {
		d.FilterErr = ferr.Error()
		d.Filters = nil
	}
	if snap != nil {
		c.fillDLQ(&d, snap, filters, ferr == nil)
	}
	c.render(w, http.StatusOK, "dlq", name, d)
}

// fillDLQ groups a snapshot's messages by class and reason, and lists
// those that pass the filters.
func (c *Console) fillDLQ(d *dlqData, snap *snapshot, filters []redrive.Filter, list bool) {
	d.FIFO, d.Messages, d.InFlight = snap.dlq.FIFO, snap.dlq.Messages, snap.dlq.InFlight
	for _, s := range snap.sources {
		d.Sources = append(d.Sources, s.Name)
	}
	d.Read, d.ReadAt, d.Took = len(snap.entries), snap.readAt, snap.took.Round(time.Millisecond).String()
	d.Truncated = len(snap.entries) >= c.cfg.PageSize
	type key struct{ class, reason string }
	groups := map[key]*group{}
	classes := map[string]bool{}
	sources := map[string]bool{}
	for _, e := range snap.entries {
		k := key{e.Class(), reason(e)}
		g, ok := groups[k]
		at := failedAt(e)
		if !ok {
			v := url.Values{"class": {k.class}}
			if k.reason != "" {
				v.Set("reason", k.reason)
			}
			g = &group{Class: k.class, Reason: k.reason, First: at, Last: at, Link: d.Base + "?" + v.Encode()}
			groups[k] = g
		}
		g.Count++
		if at.Before(g.First) {
			g.First = at
		}
		if at.After(g.Last) {
			g.Last = at
		}
		if src := e.Source(); src != "" {
			name := queueName(src)
			if !slices.Contains(g.Sources, name) {
				g.Sources = append(g.Sources, name)
			}
			sources[name] = true
		}
		classes[k.class] = true
		if list && matchAll(filters, e) {
			d.Rows = append(d.Rows, c.rowOf(d.Base, e))
		}
	}
	for _, g := range groups {
		sort.Strings(g.Sources)
		d.Groups = append(d.Groups, *g)
	}
	slices.SortFunc(d.Groups, func(a, b group) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Class+"\x00"+a.Reason, b.Class+"\x00"+b.Reason)
	})
	for k := range classes {
		d.Classes = append(d.Classes, k)
	}
	sort.Strings(d.Classes)
	for k := range sources {
		d.SourceOpts = append(d.SourceOpts, k)
	}
	sort.Strings(d.SourceOpts)
}

// matchAll reports whether e passes every filter (redrive's own Match).
func matchAll(filters []redrive.Filter, e redrive.Entry) bool {
	for _, f := range filters {
		if !f.Match(e) {
			return false
		}
	}
	return true
}

func (c *Console) rowOf(base string, e redrive.Entry) row {
	r := row{ID: e.Message.ID, Class: e.Class(), Reason: reason(e), Source: e.Source(), Group: e.Message.GroupID, Age: e.Age, At: failedAt(e),
		Link: base + "/message/" + url.PathEscape(e.Message.ID)}
	r.SourceName = queueName(r.Source)
	if e.Failure != nil {
		r.Attempts = e.Failure.Attempts
	}
	return r
}

// reason is a dead letter's failure reason: its recorded error, or a word
// on why there is none.
func reason(e redrive.Entry) string {
	if e.Failure == nil {
		if e.Message.SystemAttributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)] != "" {
			return "(moved by SQS after maxReceiveCount receives)"
		}
		return "(no failure record)"
	}
	return e.Failure.Error
}

// failedAt is when the message failed, or arrived in the DLQ when it has
// no failure record.
func failedAt(e redrive.Entry) time.Time {
	if e.Failure != nil && !e.Failure.FailedAt.IsZero() {
		return e.Failure.FailedAt
	}
	return e.Message.SentAt
}

// queueName returns the name of a queue URL or ARN, or s.
func queueName(s string) string {
	if i := strings.LastIndexAny(s, "/:"); i >= 0 && (strings.HasPrefix(s, "arn:") || strings.Contains(s, "://")) {
		return s[i+1:]
	}
	return s
}

// failQueue renders the error page of a DLQ page.
func (c *Console) failQueue(w http.ResponseWriter, name string, err error) {
	switch {
	case errors.Is(err, redrive.ErrUnknownQueue), errors.Is(err, errOutside):
		c.fail(w, http.StatusNotFound, "queue "+name, err)
	case errors.Is(err, errNotDLQ):
		c.fail(w, http.StatusBadRequest, "queue "+name, err)
	default:
		c.fail(w, http.StatusBadGateway, "queue "+name, err)
	}
}

// attr is one message attribute, as the detail page shows it.
type attr struct {
	Name, Type, Value string
	Binary            int
}

// messageData is a message detail page's data.
type messageData struct {
	DLQ, DLQLink, ID, Class string
	Failure                 *deadletter.Failure
	OutcomeUnknown          bool
	Source                  string
	DedupeID                string
	Group, DedupID          string
	ReceiveCount            int
	SentAt, FailedAt        time.Time
	Age                     time.Duration
	Attributes              []attr
	History                 *redrive.History
	HistoryRaw              string
	ShowBody                bool
	Body                    string
	BodyJSON                bool
	BodyBytes               int
	BodyLink                string
	ReadAt                  time.Time
	Visibility              string
}

func (c *Console) messagePage(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("queue"), r.PathValue("id")
	e, snap, err := c.find(r.Context(), name, id)
	if err != nil {
		c.failQueue(w, name, err)
		return
	}
	if e == nil {
		c.fail(w, http.StatusNotFound, fmt.Sprintf("message %s", id), errors.New("not in the DLQ now (moved, deleted, or in flight elsewhere)"))
		return
	}
	m := e.Message
	base := c.link("/dlq/" + url.PathEscape(name))
	d := messageData{DLQ: name, DLQLink: base, ID: m.ID, Class: e.Class(), Failure: e.Failure, Source: e.Source(),
		DedupeID: m.Attribute(deadletter.AttrID), Group: m.GroupID, DedupID: m.DeduplicationID, ReceiveCount: m.ReceiveCount,
		SentAt: m.SentAt, FailedAt: failedAt(*e), Age: e.Age, BodyBytes: len(m.Body), ReadAt: snap.readAt,
		Visibility: c.r.VisibilityTimeout().String(), BodyLink: base + "/message/" + url.PathEscape(m.ID) + "?body=1"}
	d.OutcomeUnknown = d.Class == "outcome_unknown"
	for k, v := range m.Attributes {
		a := attr{Name: k, Type: aws.ToString(v.DataType)}
		if v.StringValue != nil {
			a.Value = *v.StringValue
		} else {
			a.Binary = len(v.BinaryValue)
		}
		d.Attributes = append(d.Attributes, a)
	}
	slices.SortFunc(d.Attributes, func(a, b attr) int { return strings.Compare(a.Name, b.Name) })
	if s := m.Attribute(redrive.AttrRedrive); s != "" {
		if h, err := redrive.ParseHistory(s); err == nil {
			d.History = &h
		} else {
			d.HistoryRaw = s
		}
	}
	if r.URL.Query().Get("body") != "" {
		d.ShowBody = true
		d.Body, d.BodyJSON = pretty(m.Body)
	}
	c.render(w, http.StatusOK, "message", "message "+id, d)
}

// find returns one message of a DLQ, from the page's snapshot, read
// again when stale.
func (c *Console) find(ctx context.Context, name, id string) (*redrive.Entry, *snapshot, error) {
	snap, _, err := c.read(ctx, name, false)
	if err != nil || snap == nil {
		if err == nil {
			err = errors.New("a job is running on this DLQ and it has not been read yet: try again when the job ends")
		}
		return nil, nil, err
	}
	for i := range snap.entries {
		if snap.entries[i].Message.ID == id {
			return &snap.entries[i], snap, nil
		}
	}
	return nil, snap, nil
}

// pretty indents a JSON body; any other body is returned as it is.
func pretty(body string) (string, bool) {
	if !json.Valid([]byte(body)) {
		return body, false
	}
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(body), "", "  ") != nil {
		return body, false
	}
	return buf.String(), true
}
