package envelope

import "encoding/json"

// AllowCertHostForTest makes v accept signing certificates from host
// (host:port, as in the URL) instead of SNS's own hosts, so that a test can
// serve them from an httptest TLS server. It is compiled into this
// package's tests only: no Verifier outside them can skip the host check.
func AllowCertHostForTest(v *Verifier, host string) {
	v.allowHost = func(h string) bool { return h == host }
}

// StringToSignForTest returns the string SNS signs for the SNS message body.
func StringToSignForTest(body string) (string, error) {
	var e snsEnvelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return "", err
	}
	return stringToSign(&e)
}

// CheckCertURLForTest applies the production check to a SigningCertURL.
func CheckCertURLForTest(raw string) error { return checkCertURL(raw, nil) }

// CachedCertsForTest returns how many certificates v holds.
func CachedCertsForTest(v *Verifier) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lru.Len()
}
