// Package leasekey holds what every lease-record store shares, whatever its
// backend: the claim token and the stored key (docs/architecture.md, the
// dedupe record).
package leasekey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// MaxKeyBytes is DynamoDB's limit on a partition key's size; longer
// namespaced keys are hashed (see [PK]).
const MaxKeyBytes = 2048

// PK is the stored key for key in namespace: "<namespace>#<key>". When that
// is longer than [MaxKeyBytes] the key part is replaced by
// "sha256:<hex of sha256(key)>" (and a namespace too long to leave room is
// hashed with it).
func PK(namespace, key string) string {
	pk := namespace + "#" + key
	if len(pk) <= MaxKeyBytes {
		return pk
	}
	sum := sha256.Sum256([]byte(key))
	hashed := namespace + "#sha256:" + hex.EncodeToString(sum[:])
	if len(hashed) <= MaxKeyBytes {
		return hashed
	}
	sum = sha256.Sum256([]byte(pk))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TextPK is [PK] for a store whose keys are text (PostgreSQL's text,
// DynamoDB's UTF-8 strings): a key that is not valid UTF-8, or holds a
// NUL byte, is hashed as a long one is, so that such keys neither fail
// nor collide (the SDK would turn every invalid byte into U+FFFD).
func TextPK(namespace, key string) string {
	if utf8.ValidString(key) && !strings.ContainsRune(key, 0) {
		return PK(namespace, key)
	}
	sum := sha256.Sum256([]byte(key))
	return PK(namespace, "sha256:"+hex.EncodeToString(sum[:]))
}

// NewToken returns a random claim token.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
