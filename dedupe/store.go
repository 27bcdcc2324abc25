package dedupe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/sqsonce/sqsonce/sqsmsg"
	"github.com/sqsonce/sqsonce/step"
)

// Store records which message keys have been processed. Every Store keeps
// one record per key with the states of docs/architecture.md: IN_PROGRESS
// (claimed, under a lease) and COMPLETED. Calls after Claim are fenced by
// the claim's token: an owner whose lease was taken over gets
// [ErrNotOwner] and cannot touch the new owner's record.
//
// Implementations must pass [github.com/sqsonce/sqsonce/dedupe/dedupetest.Run].
type Store interface {
	// Claim tries to take key for lease. It succeeds (Status Claimed, with a
	// fresh Token) when there is no record, the record has expired, or the
	// record is IN_PROGRESS with a lease that has ended (a takeover) and the
	// same fingerprint. Otherwise it reports Duplicate (COMPLETED),
	// InProgress (with the other owner's LeaseUntil) or KeyReused (the
	// record's fingerprint differs from fingerprint; checked first, also
	// when the lease has ended: the crashed owner's effects are unknown).
	// An error means the store could not answer.
	Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error)
	// Extend moves the lease of the claim holding token to now+lease.
	Extend(ctx context.Context, key, token string, lease time.Duration) error
	// Complete marks the claim holding token COMPLETED: later claims of key
	// are duplicates until the record expires.
	Complete(ctx context.Context, key, token string) error
	// Release deletes the IN_PROGRESS claim holding token, so the next claim
	// of key runs at once. A record that holds steps (see [StepStore]) is
	// kept instead, with its lease ended: the next claim of the same
	// fingerprint takes it over at once and gets its steps back.
	Release(ctx context.Context, key, token string) error
}

// StepStore is a [Store] that records a handler's steps (package step) in
// its records, so that a retry, a takeover after a crash or a redrive
// resumes after the last completed step. [Middleware] puts a step
// recorder in the handler's context when its store is one. Every store of
// sqsonce is (memory, DynamoDB, PostgreSQL); the conformance suite checks
// it.
type StepStore interface {
	Store
	// SaveSteps replaces the steps recorded in the claim holding token,
	// fenced as Extend is ([ErrNotOwner]). A Claim that takes the record
	// over (its lease ended, or it was released) returns them in
	// Claim.Steps; a claim of an absent or expired record starts with
	// none.
	SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error
	// Unknown lists up to limit (0: all) records with a step whose
	// outcome is unknown, for a person to resolve. It reads the whole
	// store (a DynamoDB Scan of the table): an operator's command, not a
	// worker's.
	Unknown(ctx context.Context, limit int) ([]step.Unresolved, error)
	// Resolve records a person's decision on step name of key's record:
	// applied (done, without a result) or not applied (the next attempt
	// runs it). The step must be unknown or started ([step.ErrNotUnknown])
	// and the record not held by a live lease ([step.ErrHeld]). A redrive
	// of the message then carries it to completion.
	Resolve(ctx context.Context, key, name string, applied bool) error
}

// Status is the result of a [Store.Claim].
type Status int

const (
	// Claimed: the caller owns the key until its lease ends.
	Claimed Status = iota + 1
	// Duplicate: the key's record is COMPLETED; its effect already happened.
	Duplicate
	// InProgress: another owner holds the key until Claim.LeaseUntil.
	InProgress
	// KeyReused: the key's record was written for a different body
	// (fingerprint); processing it would silently drop one of the two.
	KeyReused
)

// String returns the status as logged.
func (s Status) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Duplicate:
		return "duplicate"
	case InProgress:
		return "in_progress"
	case KeyReused:
		return "key_reused"
	}
	return "unknown"
}

// Claim is the answer to [Store.Claim].
type Claim struct {
	Status Status
	// Token fences the claim (Claimed only): pass it to Extend, Complete and
	// Release.
	Token string
	// LeaseUntil is the caller's lease end when Claimed, the other owner's
	// when InProgress.
	LeaseUntil time.Time
	// Fingerprint is the stored record's fingerprint (Duplicate, InProgress,
	// KeyReused).
	Fingerprint string
	// Steps are the steps the record holds (Claimed by a [StepStore]):
	// those of an earlier attempt, when this claim took over a record
	// whose lease had ended or that was released. Nil for a fresh record.
	Steps map[string]step.Record
}

// Record statuses as stored.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// DefaultTTL is how long a record is kept (its expires_at), by every
// store: longer than any redelivery of the message can happen. SQS keeps a
// message at most 14 days (in the queue and then its DLQ, counted from the
// first send); a redrive sends a new message that may live 14 days more.
// 30 days covers both, so a redriven copy still dedupes.
const DefaultTTL = 30 * 24 * time.Hour

// ErrNotOwner is returned by Extend, Complete and Release when the token no
// longer holds the key: the lease was taken over by another owner, or the
// record was released, completed or expired.
var ErrNotOwner = errors.New("dedupe: not the owner: the claim was taken over, released or completed")

// KeyReuseError reports one dedupe key used for two different bodies. The
// middleware returns it wrapped in [consumer.Permanent]: the message is
// dead-lettered with class "key_reuse".
type KeyReuseError struct {
	Key         string
	Fingerprint string // this message's
	Stored      string // the record's
}

func (e *KeyReuseError) Error() string {
	return fmt.Sprintf("dedupe: key %q reused for a different body (fingerprint %.12s, stored %.12s)", e.Key, e.Fingerprint, e.Stored)
}

// FailureClass is the dead-letter class, [consumer.ClassKeyReuse].
func (e *KeyReuseError) FailureClass() string { return sqsmsg.ClassKeyReuse }

// DuplicateError reports a key whose record is already completed: the
// effect happened, and the message is acked without running its handler.
// It wraps [consumer.ErrDuplicate], so errors.Is(err,
// consumer.ErrDuplicate) holds; its text names the outcome once, with one
// prefix, for the settled log line.
type DuplicateError struct {
	Key string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("dedupe: duplicate: key %q already completed", e.Key)
}

// Unwrap returns [consumer.ErrDuplicate].
func (e *DuplicateError) Unwrap() error { return sqsmsg.ErrDuplicate }

// InProgressError reports a key held by another owner until LeaseUntil. The
// middleware returns it wrapped in [consumer.RetryAfter].
type InProgressError struct {
	Key        string
	LeaseUntil time.Time
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("dedupe: key %q in progress elsewhere until %s", e.Key, e.LeaseUntil.UTC().Format(time.RFC3339Nano))
}

// Fingerprint is the default fingerprint of a message body: the hex SHA-256.
func Fingerprint(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}
