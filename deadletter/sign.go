package deadletter

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"
)

// MinSigningKeyBytes is the shortest signing key [Failure.Sign] takes:
// 32 bytes, the size of the HMAC-SHA256 output.
const MinSigningKeyBytes = 32

// CheckSigningKey returns an error that says what to set when key is too
// short to sign with (an empty key means "do not sign" and is not checked
// here).
func CheckSigningKey(key []byte) error {
	if len(key) < MinSigningKeyBytes {
		return fmt.Errorf("deadletter: the signing key has %d bytes: use at least %d random bytes (for example the output of `openssl rand -base64 48`)", len(key), MinSigningKeyBytes)
	}
	return nil
}

// signatureVersion prefixes the signed bytes, so that a later format can
// never verify as this one.
const signatureVersion = "sqsonce-failure-v1"

// Sign sets f.Signature to the record's HMAC-SHA256 with key, bound to the
// dead letter's body. It covers Class, SourceQueue, Attempts,
// OriginalMessageID, FailedAt and the body, not Error: that text is cut
// to fit the dead-letter queue after signing. Whoever holds the key (the
// consumers that write dead letters and the redrive tool) can then tell a
// record a consumer wrote from one a producer forged: a producer may send
// anything to a queue, but cannot sign without the key.
func (f *Failure) Sign(key []byte, body string) {
	f.Signature = base64.RawStdEncoding.EncodeToString(f.mac(key, body))
}

// Verify reports whether f carries a signature [Failure.Sign] made with
// key for this body. It is false for an unsigned record, for one signed
// with another key, and for one whose signed fields or body changed.
func (f Failure) Verify(key []byte, body string) bool {
	if len(key) == 0 || f.Signature == "" {
		return false
	}
	got, err := base64.RawStdEncoding.DecodeString(f.Signature)
	if err != nil {
		return false
	}
	return hmac.Equal(got, f.mac(key, body))
}

// mac is the HMAC-SHA256 of the signed fields: each one length-prefixed,
// so that no two records share their signed bytes.
func (f Failure) mac(key []byte, body string) []byte {
	bodySum := sha256.Sum256([]byte(body))
	h := hmac.New(sha256.New, key)
	for _, field := range []string{
		signatureVersion,
		f.Class,
		f.SourceQueue,
		strconv.Itoa(f.Attempts),
		f.OriginalMessageID,
		f.FailedAt.UTC().Format(time.RFC3339Nano),
		string(bodySum[:]),
	} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		h.Write(n[:])
		h.Write([]byte(field))
	}
	return h.Sum(nil)
}
