// Package leasekey holds what every lease-record store shares, whatever its
// backend: the claim token and the stored key (docs/architecture.md, the
// dedupe record).
package leasekey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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

// NewToken returns a random claim token.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
