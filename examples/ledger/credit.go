package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// credit is one ledger message: credit Amount to Account, once per ID,
// and not before NotBefore when it is set (`send -not-before`).
type credit struct {
	ID        string
	Account   string
	Amount    int64
	NotBefore time.Time
}

// errMalformed is wrapped by every parse error: the message can never be
// applied, so the worker dead-letters it.
var errMalformed = errors.New("malformed credit")

var jsonInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// parseCredit reads a credit body: a JSON object with non-empty string
// fields "id" and "account" and "amount" a JSON integer (no fraction, no
// exponent, no quotes) within int64, and optionally "not_before", an RFC
// 3339 time. Other fields are ignored.
func parseCredit(body string) (credit, error) {
	fields, err := decodeObject(body)
	if err != nil {
		return credit{}, err
	}
	var c credit
	if c.ID, err = stringField(fields, "id"); err != nil {
		return credit{}, err
	}
	if c.Account, c.Amount, err = accountAmount(fields); err != nil {
		return credit{}, err
	}
	if _, ok := fields["not_before"]; ok {
		s, err := stringField(fields, "not_before")
		if err != nil {
			return credit{}, err
		}
		if c.NotBefore, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return credit{}, fmt.Errorf("%w: \"not_before\" is not an RFC 3339 time", errMalformed)
		}
	}
	return c, nil
}

// decodeObject reads a body that must be exactly one JSON object.
func decodeObject(body string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("%w: body is not a JSON object: %v", errMalformed, err)
	}
	if fields == nil {
		return nil, fmt.Errorf("%w: body is not a JSON object", errMalformed)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", errMalformed)
	}
	return fields, nil
}

// accountAmount reads the credit rules shared by messages and the API:
// "account" a non-empty string, "amount" a JSON integer within int64.
func accountAmount(fields map[string]json.RawMessage) (string, int64, error) {
	account, err := stringField(fields, "account")
	if err != nil {
		return "", 0, err
	}
	raw, ok := fields["amount"]
	if !ok {
		return "", 0, fmt.Errorf("%w: missing field \"amount\"", errMalformed)
	}
	num := string(bytes.TrimSpace(raw))
	if !jsonInteger.MatchString(num) {
		return "", 0, fmt.Errorf("%w: \"amount\" must be a JSON integer, got %.40s", errMalformed, num)
	}
	amount, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: \"amount\" is out of the int64 range", errMalformed)
	}
	return account, amount, nil
}

func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", fmt.Errorf("%w: missing field %q", errMalformed, name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: field %q must be a string", errMalformed, name)
	}
	if s == "" {
		return "", fmt.Errorf("%w: field %q is empty", errMalformed, name)
	}
	return s, nil
}

// creditKey is the ledger's dedupe key: the body's "id", or "" when the
// body has none (the consumer then falls back to the SQS MessageId).
func creditKey(body string) string {
	var fields map[string]json.RawMessage // a map: field names match exactly, as in parseCredit
	if json.Unmarshal([]byte(body), &fields) != nil {
		return ""
	}
	id, _ := stringField(fields, "id")
	return id
}
