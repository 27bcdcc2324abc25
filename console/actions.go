package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/redrive"
)

// selection is what an action's form selects: the page's filters (the
// f fields, redrive filter expressions) and, when messages were ticked,
// their ids (the id fields), which narrow the filters further.
type selection struct {
	Exprs   []string
	IDs     []string
	filters []redrive.Filter
}

// selectionOf reads and parses a form's selection.
func selectionOf(r *http.Request) (selection, error) {
	s := selection{Exprs: r.PostForm["f"]}
	for _, id := range r.PostForm["id"] {
		if id = strings.TrimSpace(id); id != "" {
			if strings.Contains(id, ",") {
				return s, fmt.Errorf("message id %q holds a comma", id)
			}
			s.IDs = append(s.IDs, id)
		}
	}
	all := s.Exprs
	if len(s.IDs) > 0 {
		all = append(all[:len(all):len(all)], "id="+strings.Join(s.IDs, ","))
	}
	var err error
	s.filters, err = redrive.ParseFilters(all...)
	return s, err
}

// describe says what a selection holds, for people.
func (s selection) describe() string {
	var parts []string
	if len(s.IDs) > 0 {
		parts = append(parts, fmt.Sprintf("%d selected message(s)", len(s.IDs)))
	}
	if len(s.Exprs) > 0 {
		parts = append(parts, "filters "+strings.Join(s.Exprs, " and "))
	}
	if len(parts) == 0 {
		return "every message of the DLQ"
	}
	return strings.Join(parts, ", within ")
}

// plan is a dry run that a person saw and may confirm.
type plan struct {
	id      string
	dlq     string
	sel     selection
	matched int
	at      time.Time
}

// planTTL is how long a dry run may be confirmed.
const planTTL = 10 * time.Minute

// planData is the dry-run page's data.
type planData struct {
	DLQ, DLQLink, PlanID, What string
	Sum                        redrive.Summary
	ByClass, ByDestination     []kv
	Err                        string
}

// kv is one count of a summary, sorted by name.
type kv struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func sorted(m map[string]int) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// planAction runs the dry run of a redrive: redrive's Plan, which decides
// each message's destination by the move's own rules and changes
// nothing. The page shows what would move and offers to confirm it.
func (c *Console) planAction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	sel, err := selectionOf(r)
	if err != nil {
		c.fail(w, http.StatusBadRequest, "filters", err)
		return
	}
	st := c.state(name)
	if !st.read.TryLock() {
		c.fail(w, http.StatusConflict, "queue "+name, errors.New("a job or another read holds this DLQ: try again when it ends"))
		return
	}
	q, _, err := c.resolve(r.Context(), name)
	if err != nil {
		st.read.Unlock()
		c.failQueue(w, name, err)
		return
	}
	sum, err := c.r.Plan(r.Context(), q, redrive.MoveOptions{Filters: sel.filters})
	st.read.Unlock()
	c.audit(r, "dry-run", name, sum.Matched, zap.Int("refused", sum.Refused))
	d := planData{DLQ: name, DLQLink: c.link("/dlq/" + url.PathEscape(name)), What: sel.describe(), Sum: sum,
		ByClass: sorted(sum.ByClass), ByDestination: sorted(sum.ByDestination)}
	if err != nil {
		d.Err = err.Error()
	} else if sum.Matched > 0 {
		p := &plan{id: newID(), dlq: name, sel: sel, matched: sum.Matched, at: c.now()}
		c.mu.Lock()
		for id, old := range c.plans {
			if c.now().Sub(old.at) > planTTL {
				delete(c.plans, id)
			}
		}
		c.plans[p.id] = p
		c.mu.Unlock()
		d.PlanID = p.id
	}
	c.render(w, http.StatusOK, "plan", "dry run: "+name, d)
}

// moveAction confirms a dry run: the move runs as a job, with the dry
// run's selection, moving at most the messages the dry run counted.
func (c *Console) moveAction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	id := r.PostFormValue("plan")
	c.mu.Lock()
	p, ok := c.plans[id]
	if ok {
		delete(c.plans, id)
	}
	c.mu.Unlock()
	if !ok || p.dlq != name || c.now().Sub(p.at) > planTTL {
		c.fail(w, http.StatusConflict, "redrive", errors.New("no dry run to confirm (it expired or was confirmed already): run the dry run again"))
		return
	}
	q, _, err := c.resolve(r.Context(), name)
	if err != nil {
		c.failQueue(w, name, err)
		return
	}
	j, err := c.start(name, "redrive", p.sel.describe(), p.matched, func(j *job) (redrive.Summary, error) {
		return c.r.Move(c.ctx, q, redrive.MoveOptions{Filters: p.sel.filters, Max: p.matched, Progress: j.progress})
	})
	if err != nil {
		c.fail(w, http.StatusConflict, "queue "+name, err)
		return
	}
	c.audit(r, "redrive", name, p.matched, zap.String("job", j.id))
	http.Redirect(w, r, c.link("/jobs/"+j.id), http.StatusSeeOther)
}

// exportAction streams the selection as JSON lines (redrive's Export,
// without delete: the DLQ is left as it was).
func (c *Console) exportAction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	sel, err := selectionOf(r)
	if err != nil {
		c.fail(w, http.StatusBadRequest, "filters", err)
		return
	}
	st := c.state(name)
	if !st.read.TryLock() {
		c.fail(w, http.StatusConflict, "queue "+name, errors.New("a job or another read holds this DLQ: try again when it ends"))
		return
	}
	defer st.read.Unlock()
	q, _, err := c.resolve(r.Context(), name)
	if err != nil {
		c.failQueue(w, name, err)
		return
	}
	file := fmt.Sprintf("%s-%s.jsonl", name, c.now().UTC().Format("20060102-150405"))
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Content-Disposition", `attachment; filename="`+file+`"`)
	sum, err := c.r.Export(r.Context(), q, w, redrive.ExportOptions{Filters: sel.filters})
	if err != nil {
		c.log.Warn("console: export ended early; the download is cut", zap.String("queue", name), zap.Error(err))
	}
	c.audit(r, "export", name, sum.Moved)
}

// deleteData is the delete confirmation page's data.
type deleteData struct {
	DLQ, DLQLink, What, Action string
	Count                      int
	Exprs, IDs                 []string
	BackupDir                  string
}

// deleteConfirmAction shows what a delete would remove and asks for the
// DLQ's name, typed.
func (c *Console) deleteConfirmAction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if c.cfg.BackupDir == "" {
		c.fail(w, http.StatusForbidden, "delete", errors.New("this console offers no delete (it has no backup directory)"))
		return
	}
	sel, err := selectionOf(r)
	if err != nil {
		c.fail(w, http.StatusBadRequest, "filters", err)
		return
	}
	n := -1
	c.mu.Lock()
	if st := c.queues[name]; st != nil && st.snap != nil {
		n = 0
		for _, e := range st.snap.entries {
			if matchAll(sel.filters, e) {
				n++
			}
		}
	}
	c.mu.Unlock()
	c.render(w, http.StatusOK, "delete", "delete from "+name, deleteData{DLQ: name, DLQLink: c.link("/dlq/" + url.PathEscape(name)),
		What: sel.describe(), Action: c.link("/dlq/" + url.PathEscape(name) + "/delete"), Count: n, Exprs: sel.Exprs, IDs: sel.IDs, BackupDir: c.cfg.BackupDir})
}

// deleteAction deletes a selection once the DLQ's name was typed: it is
// redrive's Export with Delete to a new file in BackupDir, so a message
// is deleted only after its line was written and synced.
func (c *Console) deleteAction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if c.cfg.BackupDir == "" {
		c.fail(w, http.StatusForbidden, "delete", errors.New("this console offers no delete (it has no backup directory)"))
		return
	}
	if r.PostFormValue("confirm") != name {
		c.fail(w, http.StatusBadRequest, "delete", errors.New("the typed name does not match the DLQ's: nothing was deleted"))
		return
	}
	sel, err := selectionOf(r)
	if err != nil {
		c.fail(w, http.StatusBadRequest, "filters", err)
		return
	}
	q, _, err := c.resolve(r.Context(), name)
	if err != nil {
		c.failQueue(w, name, err)
		return
	}
	path := filepath.Join(c.cfg.BackupDir, fmt.Sprintf("%s-deleted-%s-%s.jsonl", name, c.now().UTC().Format("20060102-150405"), newID()[:8]))
	j, err := c.start(name, "delete", sel.describe(), 0, func(j *job) (redrive.Summary, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return redrive.Summary{}, fmt.Errorf("backup file: %w (nothing was deleted)", err)
		}
		defer f.Close()
		if err := syncDir(c.cfg.BackupDir); err != nil {
			return redrive.Summary{}, fmt.Errorf("backup file: sync directory: %w (nothing was deleted)", err)
		}
		j.setBackup(path)
		return c.r.Export(c.ctx, q, f, redrive.ExportOptions{Filters: sel.filters, Delete: true, Progress: j.progress})
	})
	if err != nil {
		c.fail(w, http.StatusConflict, "queue "+name, err)
		return
	}
	c.audit(r, "delete", name, len(sel.IDs), zap.String("job", j.id), zap.Int("filters", len(sel.Exprs)))
	http.Redirect(w, r, c.link("/jobs/"+j.id), http.StatusSeeOther)
}

// syncDir makes a directory's entries durable, so that a backup file
// created in it survives a crash of the machine.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
