package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/printable"
	"github.com/sqsonce/sqsonce/redrive"
)

// job is an action running in the background (a redrive, a delete), owned
// by the Console: Close cancels it and waits for it.
type job struct {
	id, kind, dlq, what string
	planned             int
	started             time.Time

	mu      sync.Mutex
	prog    redrive.Progress
	done    bool
	sum     redrive.Summary
	err     error
	backup  string
	elapsed time.Duration
}

// maxJobs is how many finished jobs the console remembers.
const maxJobs = 50

// errBusy: a DLQ runs one job at a time.
var errBusy = errors.New("a job is already running on this DLQ: wait for it to end")

// start runs fn as a job on a DLQ, which it holds (see dlqState.read)
// until fn returns; at most one job per DLQ.
func (c *Console) start(dlq, kind, what string, planned int, fn func(*job) (redrive.Summary, error)) (*job, error) {
	st := c.state(dlq)
	c.mu.Lock()
	if st.job != "" {
		c.mu.Unlock()
		return nil, errBusy
	}
	j := &job{id: newID(), kind: kind, dlq: dlq, what: what, planned: planned, started: time.Now()}
	st.job = j.id
	c.jobs[j.id] = j
	c.order = append(c.order, j.id)
	for len(c.order) > maxJobs {
		if old := c.jobs[c.order[0]]; old != nil && old.finished() {
			delete(c.jobs, c.order[0])
		}
		c.order = c.order[1:]
	}
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		st.read.Lock() // a page's read or a dry run in progress ends first
		sum, err := fn(j)
		st.read.Unlock()
		j.finish(sum, err)
		c.mu.Lock()
		st.job = ""
		c.mu.Unlock()
		c.forget(dlq)
		fields := []zap.Field{zap.String("job", j.id), zap.String("action", kind), zap.String("queue", printable.Escape(dlq)),
			zap.Int("count", sum.Moved), zap.Int("failed", sum.Failed), zap.Int("refused", sum.Refused), zap.Int("delete_failed", sum.DeleteFailed)}
		if err != nil {
			c.log.Warn("console: "+kind+" ended with an error", append(fields, zap.Error(err))...)
			return
		}
		c.log.Info("console: "+kind+" done", fields...)
	}()
	return j, nil
}

func (j *job) progress(p redrive.Progress) {
	j.mu.Lock()
	j.prog = p
	j.mu.Unlock()
}

func (j *job) setBackup(path string) {
	j.mu.Lock()
	j.backup = path
	j.mu.Unlock()
}

func (j *job) finish(sum redrive.Summary, err error) {
	j.mu.Lock()
	j.done, j.sum, j.err, j.elapsed = true, sum, err, time.Since(j.started)
	j.mu.Unlock()
}

func (j *job) finished() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done
}

// jobView is a job as the page and its script see it. Every text that
// may hold outside words (notes, errors) is escaped (printable) here and
// set as text by the script, never as HTML.
type jobView struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"`
	DLQ      string   `json:"dlq"`
	DLQLink  string   `json:"dlq_link"`
	What     string   `json:"what"`
	State    string   `json:"state"` // running, done, failed
	Planned  int      `json:"planned"`
	Total    int      `json:"total"`
	Received int      `json:"received"`
	Moved    int      `json:"moved"`
	Skipped  int      `json:"skipped"`
	Failed   int      `json:"failed"`
	Refused  int      `json:"refused"`
	Blocked  int      `json:"blocked"`
	Deleted  int      `json:"delete_failed"`
	Released int      `json:"released"`
	Elapsed  string   `json:"elapsed"`
	ByClass  []kv     `json:"by_class"`
	ByDest   []kv     `json:"by_destination"`
	Notes    []string `json:"notes"`
	Error    string   `json:"error,omitempty"`
	Backup   string   `json:"backup,omitempty"`
}

func (c *Console) view(j *job) jobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := jobView{ID: j.id, Kind: j.kind, DLQ: j.dlq, DLQLink: c.link("/dlq/" + url.PathEscape(j.dlq)), What: printable.Escape(j.what),
		State: "running", Planned: j.planned, Total: j.prog.Total, Received: j.prog.Received, Moved: j.prog.Moved,
		Skipped: j.prog.Skipped, Failed: j.prog.Failed, Elapsed: time.Since(j.started).Round(time.Second).String(), Backup: printable.Escape(j.backup),
		ByClass: []kv{}, ByDest: []kv{}, Notes: []string{}}
	if !j.done {
		return v
	}
	s := j.sum
	v.State, v.Received, v.Moved, v.Skipped, v.Failed = "done", s.Received, s.Moved, s.Skipped, s.Failed
	v.Refused, v.Blocked, v.Deleted, v.Released = s.Refused, s.Blocked, s.DeleteFailed, s.Released
	v.Elapsed = j.elapsed.Round(time.Millisecond).String()
	v.ByClass, v.ByDest = sorted(s.ByClass), sorted(s.ByDestination)
	for _, n := range s.Notes {
		v.Notes = append(v.Notes, printable.Escape(n))
	}
	if j.err != nil {
		v.State, v.Error = "failed", printable.Escape(j.err.Error())
	}
	return v
}

func (c *Console) job(id string) *job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs[id]
}

func (c *Console) jobPage(w http.ResponseWriter, r *http.Request) {
	j := c.job(r.PathValue("id"))
	if j == nil {
		c.fail(w, http.StatusNotFound, "job", errors.New("no such job (the console remembers the last 50)"))
		return
	}
	v := c.view(j)
	c.render(w, http.StatusOK, "job", v.Kind+" "+v.DLQ, struct {
		jobView
		API string
	}{v, c.link("/api/jobs/" + j.id)})
}

func (c *Console) jobAPI(w http.ResponseWriter, r *http.Request) {
	j := c.job(r.PathValue("id"))
	w.Header().Set("Content-Type", "application/json")
	if j == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no such job"}`))
		return
	}
	_ = json.NewEncoder(w).Encode(c.view(j))
}
