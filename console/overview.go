package console

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/printable"
	"github.com/sqsonce/sqsonce/redrive"
)

// queueRow is one queue of the overview.
type queueRow struct {
	Name     string `json:"name"`
	FIFO     bool   `json:"fifo"`
	Messages int    `json:"messages"`
	InFlight int    `json:"in_flight"`
	Delayed  int    `json:"delayed"`
	// IsDLQ: some listed queue's RedrivePolicy names this queue.
	IsDLQ bool `json:"is_dlq"`
	// Oldest is the age of the oldest of a DLQ's sampled messages (DLQs
	// only: sampling is a receive, which a queue that consumers read must
	// not see); OldestText formats it.
	Oldest     time.Duration `json:"oldest_ns"`
	OldestText string        `json:"oldest"`
	// DLQ and DLQDepth: the queue's dead-letter queue and its visible
	// messages (-1 unknown).
	DLQ      string `json:"dlq,omitempty"`
	DLQDepth int    `json:"dlq_depth"`
}

// overviewCache keeps the last overview for a moment, so that several
// open pages refreshing do not multiply the calls, and each DLQ's sampled
// age for longer (a sample is a receive).
type overviewCache struct {
	mu   sync.Mutex
	at   time.Time
	rows []queueRow
	ages map[string]ageSample
}

type ageSample struct {
	at  time.Time
	age time.Duration
}

const (
	overviewTTL = 2 * time.Second
	ageTTL      = 30 * time.Second
)

// overview lists the queues by prefix with their counts, their DLQ and
// its depth, and each DLQ's oldest sampled age.
func (c *Console) overview(ctx context.Context) ([]queueRow, error) {
	o := c.ov
	o.mu.Lock()
	defer o.mu.Unlock()
	now := c.now()
	if o.rows != nil && now.Sub(o.at) < overviewTTL {
		return o.rows, nil
	}
	qs, err := c.r.Queues(ctx, c.cfg.QueuePrefix)
	if err != nil {
		return nil, err
	}
	byARN := map[string]redrive.Queue{}
	for _, q := range qs {
		if q.ARN != "" {
			byARN[q.ARN] = q
		}
	}
	dlqs := map[string]bool{}
	for _, q := range qs {
		arn := q.DeadLetterTargetARN
		if arn == "" {
			continue
		}
		d, ok := byARN[arn]
		if !ok { // a DLQ outside the prefix: shown with its sources
			if d, err = c.r.Queue(ctx, arn); err != nil {
				c.log.Warn("console: resolve a DLQ", zap.String("arn", printable.Escape(arn)), zap.Error(err))
				continue
			}
			byARN[arn] = d
			qs = append(qs, d)
		}
		dlqs[d.Name] = true
	}
	if o.ages == nil {
		o.ages = map[string]ageSample{}
	}
	rows := make([]queueRow, 0, len(qs))
	for _, q := range qs {
		row := queueRow{Name: q.Name, FIFO: q.FIFO, Messages: q.Messages, InFlight: q.InFlight, Delayed: q.Delayed, IsDLQ: dlqs[q.Name], DLQDepth: -1}
		if d, ok := byARN[q.DeadLetterTargetARN]; ok && q.DeadLetterTargetARN != "" {
			row.DLQ, row.DLQDepth = d.Name, d.Messages
		}
		row.OldestText = "n/a"
		if row.IsDLQ {
			row.Oldest = c.oldest(ctx, q, now)
			row.OldestText = ageText(row.Oldest)
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b queueRow) int { return strings.Compare(a.Name, b.Name) })
	o.rows, o.at = rows, now
	return rows, nil
}

// oldest returns a DLQ's sampled oldest age, sampling at most every
// ageTTL and never while a read or a job holds the DLQ (a sample takes up
// to 10 messages in flight for a moment, which a pass would wait for).
// Called with c.ov.mu held.
func (c *Console) oldest(ctx context.Context, q redrive.Queue, now time.Time) time.Duration {
	prev, ok := c.ov.ages[q.Name]
	if q.Messages == 0 && q.InFlight == 0 {
		delete(c.ov.ages, q.Name)
		return 0
	}
	if ok && now.Sub(prev.at) < ageTTL {
		return prev.age
	}
	st := c.state(q.Name)
	if !st.read.TryLock() {
		return prev.age
	}
	defer st.read.Unlock()
	age, err := c.r.OldestAge(ctx, q)
	if err != nil {
		c.log.Warn("console: sample a DLQ", zap.String("queue", printable.Escape(q.Name)), zap.Error(err))
		return prev.age
	}
	c.ov.ages[q.Name] = ageSample{at: now, age: age}
	return age
}

// overviewData is the overview page's data.
type overviewData struct {
	Queues     []queueRow
	Prefix     string
	RefreshMS  int64
	Visibility string
	Err        string
	Generated  time.Time
}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request) {
	rows, err := c.overview(r.Context())
	d := overviewData{Queues: rows, Prefix: c.cfg.QueuePrefix, RefreshMS: c.cfg.RefreshInterval.Milliseconds(),
		Visibility: c.r.VisibilityTimeout().String(), Generated: c.now()}
	if err != nil {
		d.Err = err.Error()
	}
	c.render(w, http.StatusOK, "overview", "Queues", d)
}

// overviewAPI is what the overview page refreshes itself from.
func (c *Console) overviewAPI(w http.ResponseWriter, r *http.Request) {
	rows, err := c.overview(r.Context())
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": printable.Escape(err.Error())})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"queues": rows, "at": whenText(c.now())})
}
