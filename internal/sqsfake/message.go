package sqsfake

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

type msg struct {
	id, body                string
	attrs                   map[string]types.MessageAttributeValue
	group, dedupeID, seqNum string
	sentAt, firstReceive    time.Time
	receivedAt              time.Time
	availableAt             time.Time // end of delay or of visibility
	handle                  string    // latest receipt handle
	origin                  string    // queue URL a move took it from
	deadLetterSource        string    // ARN of the queue whose RedrivePolicy moved it here
	traceHeader             string    // the AWSTraceHeader system attribute sent with it
	receives                int
	version                 int // bumped by every change a receive attempt must notice
	deleted                 bool
}

func (m *msg) state(now time.Time) State {
	switch {
	case !m.availableAt.After(now):
		return Visible
	case m.receives > 0:
		return InFlight
	default:
		return Delayed
	}
}

// expire drops messages older than the retention period. Callers hold f.mu.
func (q *queue) expire(now time.Time) {
	keep := time.Duration(q.intAttr("MessageRetentionPeriod")) * time.Second
	q.msgs = slices.DeleteFunc(q.msgs, func(m *msg) bool {
		if now.Sub(m.sentAt) >= keep {
			m.deleted = true
			return true
		}
		return false
	})
	for k, d := range q.dedupe {
		if now.Sub(d.at) >= dedupeWindow {
			delete(q.dedupe, k)
		}
	}
	for k, a := range q.attempts {
		if now.Sub(a.at) >= attemptWindow {
			delete(q.attempts, k)
		}
	}
}

func (f *Fake) newMessageID() string {
	n := f.nextSeq()
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// validBody reports whether every character is one SQS accepts.
func validBody(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError {
			return false
		}
		if !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return false
		}
	}
	return true
}

func validAttrName(n string) bool {
	if n == "" || len(n) > 256 || strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".") || strings.Contains(n, "..") {
		return false
	}
	low := strings.ToLower(n)
	if strings.HasPrefix(low, "aws.") || strings.HasPrefix(low, "amazon.") {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// size is the message size SQS checks against MaximumMessageSize: the body
// plus each attribute's name, data type and value.
func size(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// sendOne validates and enqueues one message. Callers hold f.mu.
func (f *Fake) sendOne(q *queue, body *string, delay int32, attrs map[string]types.MessageAttributeValue, sysAttrs map[string]types.MessageSystemAttributeValue, group, dedupe *string) (id, seqNum string, err error) {
	if body == nil || *body == "" {
		return "", "", missingParameter("MessageBody")
	}
	// AWSTraceHeader is the one system attribute a sender may set.
	var traceHeader string
	for k, v := range sysAttrs {
		if k != string(types.MessageSystemAttributeNameForSendsAWSTraceHeader) {
			return "", "", invalidParameter("Message system attribute name '%s' is invalid.", k)
		}
		if aws.ToString(v.DataType) != "String" || aws.ToString(v.StringValue) == "" {
			return "", "", invalidParameter("Message system attribute '%s' must contain a non-empty value of type 'String'.", k)
		}
		traceHeader = aws.ToString(v.StringValue)
	}
	if !validBody(*body) {
		return "", "", &types.InvalidMessageContents{Message: aws.String("Invalid binary character in the message body.")}
	}
	if len(attrs) > maxMessageAttrs {
		return "", "", invalidParameter("Number of message attributes [%d] exceeds the allowed maximum [%d].", len(attrs), maxMessageAttrs)
	}
	for k, v := range attrs {
		if !validAttrName(k) {
			return "", "", invalidParameter("Message (user) attribute '%s' has an invalid name.", k)
		}
		dt := aws.ToString(v.DataType)
		base, _, _ := strings.Cut(dt, ".")
		switch base {
		case "String", "Number":
			if aws.ToString(v.StringValue) == "" {
				return "", "", invalidParameter("Message (user) attribute '%s' must contain a non-empty value of type '%s'.", k, base)
			}
		case "Binary":
			if len(v.BinaryValue) == 0 {
				return "", "", invalidParameter("Message (user) attribute '%s' must contain a non-empty value of type 'Binary'.", k)
			}
		default:
			return "", "", invalidParameter("The type of message (user) attribute '%s' is invalid.", k)
		}
	}
	if n, max := size(*body, attrs), q.intAttr("MaximumMessageSize"); n > max {
		return "", "", invalidParameter("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max)
	}
	if delay < 0 || delay > 900 {
		return "", "", invalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.", delay)
	}
	now := time.Now()
	q.expire(now)
	m := &msg{body: *body, attrs: maps.Clone(attrs), sentAt: now, traceHeader: traceHeader}
	d := time.Duration(q.intAttr("DelaySeconds")) * time.Second
	if q.fifo() {
		if delay != 0 {
			return "", "", invalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", delay)
		}
		if aws.ToString(group) == "" {
			return "", "", missingParameter("MessageGroupId")
		}
		m.group = *group
		m.dedupeID = aws.ToString(dedupe)
		if m.dedupeID == "" {
			if !q.contentDedupe() {
				return "", "", invalidParameter("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
			}
			sum := sha256.Sum256([]byte(*body))
			m.dedupeID = hex.EncodeToString(sum[:])
		}
		if e, ok := q.dedupe[m.dedupeID]; ok {
			return e.messageID, e.seqNum, nil // accepted, not enqueued
		}
		q.fifoSeq++
		m.seqNum = fmt.Sprintf("%020d", q.fifoSeq)
	} else if delay != 0 {
		d = time.Duration(delay) * time.Second
	}
	m.id = f.newMessageID()
	m.availableAt = now.Add(d)
	if q.fifo() {
		q.dedupe[m.dedupeID] = dedupeEntry{at: now, messageID: m.id, seqNum: m.seqNum}
	}
	q.msgs = append(q.msgs, m)
	q.sent = append(q.sent, Sent{
		MessageID: m.id, Body: m.body, Attributes: maps.Clone(attrs), GroupID: m.group, DeduplicationID: m.dedupeID,
		SequenceNumber: m.seqNum, DelaySeconds: delay, At: now,
	})
	f.wake()
	return m.id, m.seqNum, nil
}

// SendMessage enqueues one message. On a FIFO queue a duplicate within the
// 5-minute deduplication window succeeds with the original MessageId and is
// not enqueued again.
func (f *Fake) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	ft, err := f.begin(ctx, "SendMessage", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.SendMessageOutput
	q, err := f.queueByURL(in.QueueUrl)
	if err == nil {
		var id, seq string
		id, seq, err = f.sendOne(q, in.MessageBody, in.DelaySeconds, in.MessageAttributes, in.MessageSystemAttributes, in.MessageGroupId, in.MessageDeduplicationId)
		if err == nil {
			out = &sqs.SendMessageOutput{MessageId: aws.String(id), MD5OfMessageBody: aws.String(md5Hex(*in.MessageBody))}
			if seq != "" {
				out.SequenceNumber = aws.String(seq)
			}
		}
	}
	f.mu.Unlock()
	return finish(ctx, "SendMessage", ft, out, err)
}

func validEntryID(id string) bool {
	if id == "" || len(id) > 80 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// checkBatch applies SQS's whole-request batch rules and records contract
// violations. Callers hold f.mu.
func (f *Fake) checkBatch(op string, ids []*string) error {
	if len(ids) == 0 {
		f.problem("%s with no entries", op)
		return &types.EmptyBatchRequest{Message: aws.String("There should be at least one entry in the request.")}
	}
	if len(ids) > maxBatchEntries {
		f.problem("%s with %d entries", op, len(ids))
		return &types.TooManyEntriesInBatchRequest{Message: aws.String(fmt.Sprintf("Maximum number of entries per request are %d. You have sent %d.", maxBatchEntries, len(ids)))}
	}
	seen := map[string]bool{}
	for _, p := range ids {
		id := aws.ToString(p)
		if !validEntryID(id) {
			f.problem("%s: invalid entry id %q", op, id)
			return &types.InvalidBatchEntryId{Message: aws.String("A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")}
		}
		if seen[id] {
			f.problem("%s: duplicate entry id %q", op, id)
			return &types.BatchEntryIdsNotDistinct{Message: aws.String("Id " + id + " repeated.")}
		}
		seen[id] = true
	}
	return nil
}

func entryError(id *string, code, message string, sender bool) types.BatchResultErrorEntry {
	return types.BatchResultErrorEntry{Id: id, Code: aws.String(code), Message: aws.String(message), SenderFault: sender}
}

// batchEntryError turns a per-entry error into a Failed entry.
func batchEntryError(id *string, err error) types.BatchResultErrorEntry {
	code, message := "InternalError", err.Error()
	if ae, ok := err.(interface {
		ErrorCode() string
		ErrorMessage() string
	}); ok {
		code, message = ae.ErrorCode(), ae.ErrorMessage()
	}
	return entryError(id, code, message, true)
}

// SendMessageBatch enqueues up to 10 messages; entries that fail validation
// (or a Fault's FailEntries) are reported in Failed.
func (f *Fake) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	ft, err := f.begin(ctx, "SendMessageBatch", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, err := f.sendBatch(ft, in)
	f.mu.Unlock()
	return finish(ctx, "SendMessageBatch", ft, out, err)
}

func (f *Fake) sendBatch(ft Fault, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
	q, err := f.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := make([]*string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = e.Id
		total += size(aws.ToString(e.MessageBody), e.MessageAttributes)
	}
	if err := f.checkBatch("SendMessageBatch", ids); err != nil {
		return nil, err
	}
	if total > maxBatchPayload {
		return nil, &types.BatchRequestTooLong{Message: aws.String(fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", maxBatchPayload, total))}
	}
	out := &sqs.SendMessageBatchOutput{Successful: []types.SendMessageBatchResultEntry{}, Failed: []types.BatchResultErrorEntry{}}
	for _, e := range in.Entries {
		if code, ok := ft.FailEntries[aws.ToString(e.Id)]; ok {
			out.Failed = append(out.Failed, entryError(e.Id, code, "injected failure", false))
			continue
		}
		id, seq, err := f.sendOne(q, e.MessageBody, e.DelaySeconds, e.MessageAttributes, e.MessageSystemAttributes, e.MessageGroupId, e.MessageDeduplicationId)
		if err != nil {
			out.Failed = append(out.Failed, batchEntryError(e.Id, err))
			continue
		}
		r := types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id), MD5OfMessageBody: aws.String(md5Hex(aws.ToString(e.MessageBody)))}
		if seq != "" {
			r.SequenceNumber = aws.String(seq)
		}
		out.Successful = append(out.Successful, r)
	}
	return out, nil
}

// ReceiveMessage returns up to MaxNumberOfMessages visible messages, waiting
// up to WaitTimeSeconds (or the queue's ReceiveMessageWaitTimeSeconds) for
// one to arrive. See the package documentation for FIFO and redrive rules.
func (f *Fake) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	ft, err := f.begin(ctx, "ReceiveMessage", in)
	if err != nil {
		return nil, err
	}
	if ft.PollOutlivesCaller {
		return f.receiveOutlivingCaller(ctx, in, ft)
	}
	out, err := f.receive(ctx, in)
	return finish(ctx, "ReceiveMessage", ft, out, err)
}

// receiveOutlivingCaller is a receive whose long poll goes on after the
// caller's context ends (Fault.PollOutlivesCaller). The poll's goroutine
// ends with its wait, or once it has taken messages.
func (f *Fake) receiveOutlivingCaller(ctx context.Context, in *sqs.ReceiveMessageInput, ft Fault) (*sqs.ReceiveMessageOutput, error) {
	type result struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := f.receive(context.WithoutCancel(ctx), in)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return finish(ctx, "ReceiveMessage", ft, r.out, r.err)
	case <-ctx.Done():
		return nil, opError("ReceiveMessage", ctx.Err())
	}
}

func (f *Fake) receive(ctx context.Context, in *sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	q, err := f.queueByURL(in.QueueUrl)
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	max := int(in.MaxNumberOfMessages)
	if max == 0 {
		max = 1
	}
	if max < 1 || max > maxBatchEntries {
		f.problem("ReceiveMessage MaxNumberOfMessages=%d", in.MaxNumberOfMessages)
		f.mu.Unlock()
		return nil, invalidParameter("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", in.MaxNumberOfMessages)
	}
	if in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > maxWaitTimeSeconds {
		f.problem("ReceiveMessage WaitTimeSeconds=%d", in.WaitTimeSeconds)
		f.mu.Unlock()
		return nil, invalidParameter("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", in.WaitTimeSeconds)
	}
	if in.VisibilityTimeout < 0 || in.VisibilityTimeout > sqslimits.MaxVisibilitySeconds {
		f.problem("ReceiveMessage VisibilityTimeout=%d", in.VisibilityTimeout)
		f.mu.Unlock()
		return nil, invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", in.VisibilityTimeout)
	}
	wait := time.Duration(in.WaitTimeSeconds) * time.Second
	if in.WaitTimeSeconds == 0 {
		wait = time.Duration(q.intAttr("ReceiveMessageWaitTimeSeconds")) * time.Second
	}
	f.mu.Unlock()

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		if f.queues[q.url] != q {
			f.mu.Unlock()
			return nil, &types.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
		}
		now := time.Now()
		vis := q.visibility()
		if in.VisibilityTimeout != 0 {
			vis = time.Duration(in.VisibilityTimeout) * time.Second
		}
		msgs := f.pick(q, in, max, vis, now)
		notify := f.notify
		next := q.nextAvailable(now)
		f.mu.Unlock()
		if len(msgs) > 0 || wait == 0 {
			return &sqs.ReceiveMessageOutput{Messages: msgs}, nil
		}
		var tick <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(next.Sub(now))
			tick = t.C
		}
		select {
		case <-ctx.Done():
			stop(t)
			return nil, ctx.Err()
		case <-deadline.C:
			stop(t)
			return &sqs.ReceiveMessageOutput{Messages: []types.Message{}}, nil
		case <-notify:
		case <-tick:
		}
		stop(t)
	}
}

func stop(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// nextAvailable is the earliest future time a message becomes visible.
func (q *queue) nextAvailable(now time.Time) time.Time {
	var next time.Time
	for _, m := range q.msgs {
		if m.availableAt.After(now) && (next.IsZero() || m.availableAt.Before(next)) {
			next = m.availableAt
		}
	}
	return next
}

// pick chooses and marks the messages of one receive. Callers hold f.mu.
func (f *Fake) pick(q *queue, in *sqs.ReceiveMessageInput, max int, vis time.Duration, now time.Time) []types.Message {
	q.expire(now)
	attemptID := aws.ToString(in.ReceiveRequestAttemptId)
	if q.fifo() && attemptID != "" {
		if a := q.attempts[attemptID]; a != nil {
			if a.unchanged() {
				out := make([]types.Message, len(a.msgs))
				for i, m := range a.msgs {
					m.availableAt = now.Add(vis)
					out[i] = m.toSDK(q, in)
				}
				return out
			}
			delete(q.attempts, attemptID)
		}
	}
	dlqARN, maxReceives := q.redrive()
	dlq := f.queueByARN(dlqARN)
	blocked := map[string]bool{}
	if q.fifo() {
		for _, m := range q.msgs {
			if m.state(now) == InFlight {
				blocked[m.group] = true
			}
		}
	}
	var picked []*msg
	for i := 0; i < len(q.msgs) && len(picked) < max; {
		m := q.msgs[i]
		if q.fifo() && blocked[m.group] {
			i++
			continue
		}
		if m.state(now) != Visible {
			blocked[m.group] = true // FIFO: later messages of the group wait
			i++
			continue
		}
		if dlq != nil && m.receives >= maxReceives {
			q.msgs = slices.Delete(q.msgs, i, i+1)
			f.moveTo(q, dlq, m, now)
			dlq.msgs[len(dlq.msgs)-1].deadLetterSource = q.arn // SQS stamps its own maxReceiveCount moves
			continue
		}
		m.receives++
		m.version++
		if m.firstReceive.IsZero() {
			m.firstReceive = now
		}
		m.receivedAt = now
		m.handle = fmt.Sprintf("AQEB%s-%d", m.id, f.nextSeq())
		q.handles[m.handle] = m
		m.availableAt = now.Add(vis)
		picked = append(picked, m)
		i++
	}
	out := make([]types.Message, len(picked))
	for i, m := range picked {
		out[i] = m.toSDK(q, in)
	}
	if q.fifo() && attemptID != "" && len(picked) > 0 {
		a := &attempt{at: now, msgs: picked}
		for _, m := range picked {
			a.handles = append(a.handles, m.handle)
			a.versions = append(a.versions, m.version)
		}
		q.attempts[attemptID] = a
	}
	return out
}

// unchanged reports whether no message of a receive attempt was deleted,
// received again or had its visibility changed since.
func (a *attempt) unchanged() bool {
	for i, m := range a.msgs {
		if m.deleted || m.handle != a.handles[i] || m.version != a.versions[i] {
			return false
		}
	}
	return true
}

// moveTo moves a message (already removed from src.msgs) to dst as SQS's
// moves do: keeping its id, body, attributes, FIFO group and send time,
// with a receive count of zero. Callers hold f.mu.
func (f *Fake) moveTo(src, dst *queue, m *msg, now time.Time) {
	m.deleted = true
	m.version++
	c := &msg{
		id: m.id, body: m.body, attrs: maps.Clone(m.attrs), group: m.group, dedupeID: m.dedupeID,
		sentAt: m.sentAt, availableAt: now, origin: src.url,
	}
	if dst.fifo() {
		dst.fifoSeq++
		c.seqNum = fmt.Sprintf("%020d", dst.fifoSeq)
	}
	dst.msgs = append(dst.msgs, c)
	dst.sent = append(dst.sent, Sent{
		MessageID: c.id, Body: c.body, Attributes: maps.Clone(c.attrs), GroupID: c.group, DeduplicationID: c.dedupeID,
		SequenceNumber: c.seqNum, At: now, MovedFrom: src.url,
	})
	f.wake()
}

func wants(names []string, name string) bool {
	for _, n := range names {
		if n == "All" || n == ".*" || n == name || strings.HasSuffix(n, ".*") && strings.HasPrefix(name, strings.TrimSuffix(n, ".*")) {
			return true
		}
	}
	return false
}

// toSDK renders a received message with the attributes the call asked for.
func (m *msg) toSDK(q *queue, in *sqs.ReceiveMessageInput) types.Message {
	var sysNames []string
	for _, n := range in.MessageSystemAttributeNames {
		sysNames = append(sysNames, string(n))
	}
	//lint:ignore SA1019 SQS still honours the deprecated field, so the fake does too.
	for _, n := range in.AttributeNames {
		sysNames = append(sysNames, string(n))
	}
	sys := map[string]string{
		"ApproximateReceiveCount":          strconv.Itoa(m.receives),
		"SentTimestamp":                    strconv.FormatInt(m.sentAt.UnixMilli(), 10),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
		"SenderId":                         "AIDAIT2UOQQY3AUEKVGXU",
	}
	if q.fifo() {
		sys["MessageGroupId"] = m.group
		sys["MessageDeduplicationId"] = m.dedupeID
		sys["SequenceNumber"] = m.seqNum
	}
	if m.deadLetterSource != "" {
		sys[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)] = m.deadLetterSource
	}
	if m.traceHeader != "" {
		sys[string(types.MessageSystemAttributeNameAWSTraceHeader)] = m.traceHeader
	}
	out := types.Message{
		MessageId:     aws.String(m.id),
		ReceiptHandle: aws.String(m.handle),
		Body:          aws.String(m.body),
		MD5OfBody:     aws.String(md5Hex(m.body)),
	}
	for k, v := range sys {
		if wants(sysNames, k) {
			if out.Attributes == nil {
				out.Attributes = map[string]string{}
			}
			out.Attributes[k] = v
		}
	}
	for k, v := range m.attrs {
		if wants(in.MessageAttributeNames, k) {
			if out.MessageAttributes == nil {
				out.MessageAttributes = map[string]types.MessageAttributeValue{}
			}
			out.MessageAttributes[k] = v
		}
	}
	return out
}

// deleteOne deletes by receipt handle. A handle the queue never issued is
// ReceiptHandleIsInvalid. As SQS documents, deleting with a handle from an
// earlier receive succeeds but does not delete the message, and deleting a
// message already deleted succeeds. Callers hold f.mu.
func (f *Fake) deleteOne(q *queue, handle string) error {
	m := q.handles[handle]
	if m == nil {
		return &types.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle \"" + handle + "\" is not a valid receipt handle.")}
	}
	if m.deleted || m.handle != handle {
		return nil
	}
	m.deleted = true
	m.version++
	q.msgs = slices.DeleteFunc(q.msgs, func(x *msg) bool { return x == m })
	f.wake()
	return nil
}

// DeleteMessage deletes one message (see deleteOne for stale handles).
func (f *Fake) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	ft, err := f.begin(ctx, "DeleteMessage", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.DeleteMessageOutput
	q, err := f.queueByURL(in.QueueUrl)
	if err == nil {
		err = f.deleteOne(q, aws.ToString(in.ReceiptHandle))
	}
	if err == nil {
		out = &sqs.DeleteMessageOutput{}
	}
	f.mu.Unlock()
	return finish(ctx, "DeleteMessage", ft, out, err)
}

// DeleteMessageBatch deletes up to 10 messages, with per-entry failures.
func (f *Fake) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	ft, err := f.begin(ctx, "DeleteMessageBatch", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, err := f.deleteBatch(ft, in)
	f.mu.Unlock()
	return finish(ctx, "DeleteMessageBatch", ft, out, err)
}

func (f *Fake) deleteBatch(ft Fault, in *sqs.DeleteMessageBatchInput) (*sqs.DeleteMessageBatchOutput, error) {
	q, err := f.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := make([]*string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if err := f.checkBatch("DeleteMessageBatch", ids); err != nil {
		return nil, err
	}
	out := &sqs.DeleteMessageBatchOutput{Successful: []types.DeleteMessageBatchResultEntry{}, Failed: []types.BatchResultErrorEntry{}}
	for _, e := range in.Entries {
		if code, ok := ft.FailEntries[aws.ToString(e.Id)]; ok {
			out.Failed = append(out.Failed, entryError(e.Id, code, "injected failure", false))
			continue
		}
		if err := f.deleteOne(q, aws.ToString(e.ReceiptHandle)); err != nil {
			out.Failed = append(out.Failed, batchEntryError(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// changeOne changes a message's visibility and logs the attempt. A handle
// the queue never issued, or one from an earlier receive, or of a deleted
// message, is ReceiptHandleIsInvalid; a message whose visibility already
// ended is MessageNotInflight; a timeout outside 0 to 43200 seconds, or one
// that would end more than 12 hours after the receive, is
// InvalidParameterValue. Callers hold f.mu.
func (f *Fake) changeOne(q *queue, handle string, secs int32) (err error) {
	now := time.Now()
	defer func() {
		entry := VisibilityChange{QueueURL: q.url, Handle: handle, Seconds: secs, At: now}
		if m := q.handles[handle]; m != nil {
			entry.MessageID = m.id
		}
		if err != nil {
			entry.Err = aws.ToString(batchEntryError(nil, err).Code)
		}
		f.visLog = append(f.visLog, entry)
	}()
	if secs < 0 || secs > sqslimits.MaxVisibilitySeconds {
		f.problem("ChangeMessageVisibility VisibilityTimeout=%d", secs)
		return invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200.", secs)
	}
	m := q.handles[handle]
	if m == nil || m.deleted || m.handle != handle {
		return &types.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle \"" + handle + "\" is not a valid receipt handle.")}
	}
	if m.state(now) != InFlight {
		return &types.MessageNotInflight{Message: aws.String("Message does not exist or is not available for visibility timeout change.")}
	}
	end := now.Add(time.Duration(secs) * time.Second)
	if end.After(m.receivedAt.Add(maxVisibility)) {
		return invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", secs)
	}
	m.availableAt = end
	m.version++
	f.wake()
	return nil
}

// ChangeMessageVisibility changes one message's visibility (see changeOne).
func (f *Fake) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	ft, err := f.begin(ctx, "ChangeMessageVisibility", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	var out *sqs.ChangeMessageVisibilityOutput
	q, err := f.queueByURL(in.QueueUrl)
	if err == nil {
		err = f.changeOne(q, aws.ToString(in.ReceiptHandle), in.VisibilityTimeout)
	}
	if err == nil {
		out = &sqs.ChangeMessageVisibilityOutput{}
	}
	f.mu.Unlock()
	return finish(ctx, "ChangeMessageVisibility", ft, out, err)
}

// ChangeMessageVisibilityBatch changes up to 10 visibilities, with per-entry
// failures.
func (f *Fake) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	ft, err := f.begin(ctx, "ChangeMessageVisibilityBatch", in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	out, err := f.changeBatch(ft, in)
	f.mu.Unlock()
	return finish(ctx, "ChangeMessageVisibilityBatch", ft, out, err)
}

func (f *Fake) changeBatch(ft Fault, in *sqs.ChangeMessageVisibilityBatchInput) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	q, err := f.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := make([]*string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if err := f.checkBatch("ChangeMessageVisibilityBatch", ids); err != nil {
		return nil, err
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{Successful: []types.ChangeMessageVisibilityBatchResultEntry{}, Failed: []types.BatchResultErrorEntry{}}
	for _, e := range in.Entries {
		if code, ok := ft.FailEntries[aws.ToString(e.Id)]; ok {
			out.Failed = append(out.Failed, entryError(e.Id, code, "injected failure", false))
			continue
		}
		if err := f.changeOne(q, aws.ToString(e.ReceiptHandle), e.VisibilityTimeout); err != nil {
			out.Failed = append(out.Failed, batchEntryError(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}
