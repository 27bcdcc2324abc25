package redrive

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/printable"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// Record is one line of an export file (JSON lines).
type Record struct {
	// MessageID is the SQS MessageId in the DLQ.
	MessageID string `json:"message_id"`
	// Body is the message body, unchanged.
	Body string `json:"body"`
	// Attributes are the message attributes, all of them.
	Attributes map[string]Attribute `json:"attributes,omitempty"`
	// GroupID is the FIFO MessageGroupId.
	GroupID string `json:"group_id,omitempty"`
	// DeduplicationID is the FIFO MessageDeduplicationId it had in the DLQ.
	DeduplicationID string `json:"deduplication_id,omitempty"`
	// SentAt is when it was sent to the DLQ.
	SentAt time.Time `json:"sent_at,omitzero"`
	// ReceiveCount is its ApproximateReceiveCount in the DLQ.
	ReceiveCount int `json:"receive_count,omitempty"`
	// Failure is its parsed sqsonce-failure attribute (also kept verbatim
	// in Attributes).
	Failure *deadletter.Failure `json:"failure,omitempty"`
}

// class is the record's failure class, from Failure or else from its
// sqsonce-failure attribute.
func (rec Record) class() string {
	f := rec.Failure
	if f == nil {
		if a, ok := rec.Attributes[deadletter.AttrFailure]; ok && a.StringValue != nil {
			var pf deadletter.Failure
			if json.Unmarshal([]byte(*a.StringValue), &pf) == nil {
				f = &pf
			}
		}
	}
	if f == nil || f.Class == "" {
		return ClassNone
	}
	return f.Class
}

// Attribute is a message attribute in a [Record].
type Attribute struct {
	// DataType is String, Number or Binary, with any custom suffix.
	DataType string `json:"data_type"`
	// StringValue is set for String and Number types.
	StringValue *string `json:"string_value,omitempty"`
	// BinaryValue is set for Binary types (base64 in JSON).
	BinaryValue []byte `json:"binary_value,omitempty"`
}

// messageAttributes returns the record's attributes as SQS takes them.
func (rec Record) messageAttributes() map[string]types.MessageAttributeValue {
	if len(rec.Attributes) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(rec.Attributes))
	for k, a := range rec.Attributes {
		out[k] = types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
	}
	return out
}

// recordOf builds the export record of an entry.
func recordOf(e Entry) Record {
	m := e.Message
	rec := Record{MessageID: m.ID, Body: m.Body, GroupID: m.GroupID, DeduplicationID: m.DeduplicationID,
		SentAt: m.SentAt.UTC(), ReceiveCount: m.ReceiveCount, Failure: e.Failure}
	if m.SentAt.IsZero() {
		rec.SentAt = time.Time{}
	}
	if len(m.Attributes) > 0 {
		rec.Attributes = make(map[string]Attribute, len(m.Attributes))
		for k, v := range m.Attributes {
			rec.Attributes[k] = Attribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
	}
	return rec
}

// ExportOptions shape a [Redriver.Export].
type ExportOptions struct {
	// Filters select the messages exported (all must match).
	Filters []Filter
	// Max exports at most this many messages; 0 means all.
	Max int
	// Delete deletes each exported message from the DLQ once its line was
	// written and synced to stable storage (the writer must then have a
	// Sync method, as *os.File does). Without it the DLQ is left as it was.
	Delete bool
	// Progress, when not nil, is called after each step.
	Progress func(Progress)
}

// syncer is a writer that can flush to stable storage.
type syncer interface{ Sync() error }

// Export writes a DLQ's messages to w as JSON lines, one [Record] each.
// With Delete, a message is deleted only after its line was written and
// synced; without it every message is visible again when Export returns.
// On a FIFO DLQ, without Delete, only the messages SQS hands out while the
// earlier ones of their group are held can be read.
func (r *Redriver) Export(ctx context.Context, dlq Queue, w io.Writer, opts ExportOptions) (sum Summary, err error) {
	sy, canSync := w.(syncer)
	if opts.Delete && !canSync {
		return Summary{}, errors.New("redrive: export with Delete needs a writer that syncs (a file)")
	}
	if opts.Max < 0 {
		return Summary{}, errors.New("redrive: Max must not be negative")
	}
	x := &exporter{r: r, p: newPass(r, dlq), dlq: dlq, opts: opts, bw: bufio.NewWriter(w), start: time.Now(), total: expected(dlq, opts.Max)}
	if canSync {
		x.sync = sy
	}
	x.sum = Summary{ByClass: map[string]int{}}
	if len(opts.Filters) > 0 {
		x.sum.Seen = &Census{}
	}
	x.sel = newSelector(x.p, dlq.FIFO, opts.Filters, opts.Max, &x.sum)
	defer func() {
		x.sum.Released, _ = x.p.finish(ctx)
		x.sum.Notes = append(x.sum.Notes, x.p.notes...)
		if dlq.FIFO && !opts.Delete {
			x.sum.Notes = append(x.sum.Notes, "FIFO: without --delete only the messages SQS hands out while the earlier ones of their group are held can be read")
		}
		x.sum.Elapsed = time.Since(x.start)
		r.metrics.record(ctx, "export", dlq, x.sum)
		sum = x.sum
	}()
	next := func() int {
		if opts.Max > 0 {
			return min(sqslimits.MaxBatchEntries, opts.Max-x.sum.Matched)
		}
		return sqslimits.MaxBatchEntries
	}
	return x.sum, x.p.run(ctx, next, x.batch)
}

// exporter is the state of one Export.
type exporter struct {
	r     *Redriver
	p     *pass
	dlq   Queue
	opts  ExportOptions
	sel   *selector
	sum   Summary
	bw    *bufio.Writer
	sync  syncer // nil: the writer cannot sync
	start time.Time
	total int
}

// batch writes the selected messages of one batch and, with Delete,
// deletes them once their lines are on stable storage.
func (x *exporter) batch(ctx context.Context, msgs []*sqsmsg.Message) (err error) {
	defer func() {
		if err != nil { // hand back what this batch did not get to
			for _, m := range msgs {
				x.p.hold(m)
			}
		}
	}()
	written, err := x.write(msgs)
	if err != nil {
		return err
	}
	if err := x.commit(written); err != nil {
		return err
	}
	x.sum.Moved += len(written)
	x.sum.Active = time.Since(x.start)
	x.progress(PhaseSent)
	if !x.opts.Delete {
		for _, m := range written {
			x.p.hold(m)
		}
		return nil
	}
	for _, f := range x.p.delete(ctx, written) {
		x.sum.DeleteFailed++
		x.p.undeleted[f.ID] = true
	}
	x.progress(PhaseDeleted)
	return nil
}

// write sorts a batch (see selector) and writes the record of each
// selected message to the buffer; it returns the messages written.
func (x *exporter) write(msgs []*sqsmsg.Message) (written []*sqsmsg.Message, err error) {
	for _, m := range msgs {
		e := x.r.entry(m)
		x.sum.Received++
		x.sum.census(e)
		switch {
		case x.sel.groupBlocked(m):
			continue
		case !x.sel.selected(e):
			x.sum.Skipped++
			x.sel.leave(m)
			continue
		}
		x.sum.Matched++
		b, err := json.Marshal(recordOf(e))
		if err != nil {
			return nil, fmt.Errorf("redrive: export: encode %s: %w", m.ID, err)
		}
		b = append(b, '\n')
		if _, err := x.bw.Write(b); err != nil {
			return nil, fmt.Errorf("redrive: export: write: %w", err)
		}
		written = append(written, m)
		x.sum.ByClass[e.Class()]++
	}
	return written, nil
}

// commit flushes the written lines and, when the writer can, syncs them
// to stable storage.
func (x *exporter) commit(written []*sqsmsg.Message) error {
	if err := x.bw.Flush(); err != nil {
		return fmt.Errorf("redrive: export: write: %w", err)
	}
	if x.sync != nil && len(written) > 0 {
		if err := x.sync.Sync(); err != nil {
			return fmt.Errorf("redrive: export: sync: %w", err)
		}
	}
	return nil
}

// progress reports progress.
func (x *exporter) progress(ph Phase) {
	if x.opts.Progress != nil {
		x.opts.Progress(Progress{Phase: ph, Total: x.total, Received: x.sum.Received, Moved: x.sum.Moved, Skipped: x.sum.Skipped, Failed: x.sum.Failed, Elapsed: time.Since(x.start)})
	}
}

// ImportOptions shape a [Redriver.Import].
type ImportOptions struct {
	// Rate caps the import at this many messages per second; 0: no cap.
	Rate float64
	// Progress, when not nil, is called after each batch.
	Progress func(Progress)
	// Total is the number of records, for progress reports (see CheckRecords).
	Total int
}

// CheckRecords reads an export file to its end and returns how many
// records it holds, or an error wrapping [ErrBadRecord] naming the first
// bad line. A FIFO destination needs a group id on every record; a standard
// one accepts none. A record SQS cannot take is bad too: more than 10
// message attributes, or over SQS's 1 MiB counted as SQS counts it (the
// body plus each attribute's name, data type and value).
func CheckRecords(r io.Reader, fifo bool) (int, error) {
	n := 0
	err := eachRecord(r, func(line int, rec Record) error {
		n++
		switch {
		case fifo && rec.GroupID == "":
			return fmt.Errorf("%w: line %d: no group_id, and the destination is a FIFO queue", ErrKindMismatch, line)
		case !fifo && rec.GroupID != "":
			return fmt.Errorf("%w: line %d: has a group_id, and the destination is a standard queue (the order within groups would be lost)", ErrKindMismatch, line)
		}
		return nil
	})
	return n, err
}

// MaxRecordBytes is the longest line of an export file that Import and
// CheckRecords accept: 8 MiB, room for SQS's largest message (1 MiB) with
// every byte JSON-escaped plus its attributes. A longer line is an error
// wrapping [ErrBadRecord], found without reading the line whole.
const MaxRecordBytes = 8 << 20

// eachRecord calls fn for every record of a JSON lines stream; blank lines
// are ignored.
func eachRecord(r io.Reader, fn func(line int, rec Record) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	var buf []byte
	for line := 1; ; line++ {
		buf = buf[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if len(buf)+len(chunk) > MaxRecordBytes+1 { // +1: the newline
				return fmt.Errorf("%w: line %d: longer than %d MiB", ErrBadRecord, line, MaxRecordBytes>>20)
			}
			buf = append(buf, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if len(bytes.TrimSpace(buf)) > 0 {
			var rec Record
			dec := json.NewDecoder(bytes.NewReader(buf))
			dec.DisallowUnknownFields()
			if derr := dec.Decode(&rec); derr != nil {
				return fmt.Errorf("%w: line %d: %v", ErrBadRecord, line, derr)
			}
			if dec.More() {
				return fmt.Errorf("%w: line %d: more than one JSON value", ErrBadRecord, line)
			}
			if rec.Body == "" {
				return fmt.Errorf("%w: line %d: empty body", ErrBadRecord, line)
			}
			for k, a := range rec.Attributes {
				if k == "" || a.DataType == "" || (a.StringValue == nil && a.BinaryValue == nil) {
					return fmt.Errorf("%w: line %d: attribute %q needs a data_type and a value", ErrBadRecord, line, k)
				}
			}
			if n := len(rec.Attributes); n > sqslimits.MaxMessageAttributes {
				return fmt.Errorf("%w: line %d: %d message attributes (SQS allows %d)", ErrBadRecord, line, n, sqslimits.MaxMessageAttributes)
			}
			if n := sqslimits.MessageSize(rec.Body, rec.messageAttributes()); n > sqslimits.MaxMessageBytes {
				return fmt.Errorf("%w: line %d: %d bytes with its attributes (SQS allows %d per message)", ErrBadRecord, line, n, sqslimits.MaxMessageBytes)
			}
			if ferr := fn(line, rec); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("redrive: read records: %w", err)
		}
	}
}

// Import sends the records of an export file to a queue, batched, each
// with its body and attributes exactly as recorded (sqsonce-failure too: an
// import restores a DLQ; move the messages on afterwards). On FIFO queues
// group ids are kept, in file order, with a new MessageDeduplicationId.
// Run [CheckRecords] first: Import stops at the first bad line, after
// sending the lines before it.
func (r *Redriver) Import(ctx context.Context, rd io.Reader, to Queue, opts ImportOptions) (sum Summary, err error) {
	start := time.Now()
	sum = Summary{ByClass: map[string]int{}}
	runID := newRunID()
	paced := 0
	defer func() {
		sum.Elapsed = time.Since(start)
		r.metrics.record(ctx, "import", to, sum)
	}()
	var batch []Record
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if opts.Rate > 0 {
			paced += len(batch)
			due := start.Add(time.Duration(float64(paced) / opts.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
		}
		entries := make([]types.SendMessageBatchRequestEntry, len(batch))
		for i, rec := range batch {
			e := types.SendMessageBatchRequestEntry{Id: aws.String(batchID(i)), MessageBody: aws.String(rec.Body), MessageAttributes: rec.messageAttributes()}
			if to.FIFO {
				e.MessageGroupId = aws.String(rec.GroupID)
				e.MessageDeduplicationId = aws.String(fmt.Sprintf("%s-%d", runID, sum.Received-len(batch)+i))
			}
			entries[i] = e
		}
		pending := entries
		for attempt := 0; attempt < 2 && len(pending) > 0; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			out, err := r.client.SendMessageBatch(cctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(to.URL), Entries: pending}, sdkhttp.SQS)
			cancel()
			if err != nil {
				if attempt == 1 || ctx.Err() != nil {
					sum.Failed += len(pending)
					return fmt.Errorf("redrive: import: send to %s: %w", to.Name, err)
				}
				continue
			}
			sum.Active = time.Since(start)
			for _, s := range out.Successful {
				if i, ok := entryIndex(s.Id, len(batch)); ok {
					sum.Moved++
					sum.ByClass[batch[i].class()]++
				}
			}
			var retry []types.SendMessageBatchRequestEntry
			for _, f := range out.Failed {
				for _, e := range pending {
					if aws.ToString(e.Id) == aws.ToString(f.Id) {
						if f.SenderFault || attempt == 1 || to.FIFO {
							sum.Failed++
							sum.Notes = appendOnce(sum.Notes, fmt.Sprintf("send: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message)))
						} else {
							retry = append(retry, e)
						}
					}
				}
			}
			pending = retry
		}
		batch = batch[:0]
		if to.FIFO && sum.Failed > 0 {
			return fmt.Errorf("redrive: import stopped after %d records: a message for a FIFO queue could not be sent, and sending the rest of its group would reorder it", sum.Received)
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: PhaseSent, Total: opts.Total, Received: sum.Received, Moved: sum.Moved, Failed: sum.Failed, Elapsed: time.Since(start)})
		}
		return nil
	}
	size := 0
	err = eachRecord(rd, func(line int, rec Record) error {
		if to.FIFO != (rec.GroupID != "") {
			return fmt.Errorf("%w: line %d: record and queue kinds differ", ErrKindMismatch, line)
		}
		// As SQS counts the batch's payload: bodies and attributes.
		s := sqslimits.MessageSize(rec.Body, rec.messageAttributes())
		if len(batch) == sqslimits.MaxBatchEntries || (len(batch) > 0 && size+s > maxBatchBytes) {
			if err := flush(); err != nil {
				return err
			}
			size = 0
		}
		sum.Received++
		batch = append(batch, rec)
		size += s
		return ctx.Err()
	})
	if err == nil {
		err = flush()
	}
	sum.Matched = sum.Received
	return sum, err
}

// appendOnce appends s, escaped for a terminal (printable.Escape), unless
// present (at most 20 notes).
func appendOnce(notes []string, s string) []string {
	s = printable.Escape(s)
	for _, n := range notes {
		if n == s {
			return notes
		}
	}
	if len(notes) >= 20 {
		return notes
	}
	return append(notes, s)
}
