package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// credit is one ledger message: credit Amount to Account, once per ID.
type credit struct {
	ID      string
	Account string
	Amount  int64
}

// errMalformed is wrapped by every parse error: the message can never be
// applied, so the worker dead-letters it.
var errMalformed = errors.New("malformed credit")

var jsonInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// parseCredit reads a credit body: a JSON object with non-empty string
// fields "id" and "account" and "amount" a JSON integer (no fraction, no
// exponent, no quotes) within int64. Other fields are ignored.
func parseCredit(body string) (credit, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return credit{}, fmt.Errorf("%w: body is not a JSON object: %v", errMalformed, err)
	}
	if fields == nil {
		return credit{}, fmt.Errorf("%w: body is not a JSON object", errMalformed)
	}
	if dec.More() {
		return credit{}, fmt.Errorf("%w: trailing data after the JSON object", errMalformed)
	}
	var c credit
	var err error
	if c.ID, err = stringField(fields, "id"); err != nil {
		return credit{}, err
	}
	if c.Account, err = stringField(fields, "account"); err != nil {
		return credit{}, err
	}
	raw, ok := fields["amount"]
	if !ok {
		return credit{}, fmt.Errorf("%w: missing field \"amount\"", errMalformed)
	}
	num := string(bytes.TrimSpace(raw))
	if !jsonInteger.MatchString(num) {
		return credit{}, fmt.Errorf("%w: \"amount\" must be a JSON integer, got %.40s", errMalformed, num)
	}
	if c.Amount, err = strconv.ParseInt(num, 10, 64); err != nil {
		return credit{}, fmt.Errorf("%w: \"amount\" is out of the int64 range", errMalformed)
	}
	return c, nil
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
