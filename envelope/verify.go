package envelope

import (
	"cmp"
	"container/list"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// maxCertBytes bounds a signing certificate's download. SNS's are under
// 2 KiB.
const maxCertBytes = 16 << 10

// VerifierConfig configures [NewVerifier]; the zero value is ready.
type VerifierConfig struct {
	// HTTPClient fetches signing certificates. Defaults to a client with
	// the default transport (system roots, proxy from the environment).
	// Whatever the client, redirects are never followed and each fetch is
	// bounded by FetchTimeout and by 16 KiB.
	HTTPClient *http.Client
	// FetchTimeout bounds one certificate fetch. Defaults to 10s.
	FetchTimeout time.Duration
	// CacheSize is how many certificates are kept; the least recently used
	// one goes first. SNS uses one certificate per region at a time.
	// Defaults to 32.
	CacheSize int
}

// Verifier checks the signatures of SNS messages (see the package doc,
// "Signatures"). It is safe for concurrent use; consumers that share one
// share its certificate cache.
type Verifier struct {
	client  *http.Client
	timeout time.Duration
	size    int

	// allowHost replaces the check that a certificate's host is SNS's
	// own. Nil in every Verifier that NewVerifier returns; only this
	// package's tests set it (to their TLS test server's host).
	allowHost func(host string) bool

	mu       sync.Mutex
	cache    map[string]*list.Element // of *cachedCert, most recently used at the front
	lru      *list.List
	inflight map[string]*certFetch
}

type cachedCert struct {
	url  string
	cert *x509.Certificate
}

// certFetch is one certificate fetch that other verifications of the same
// URL wait for.
type certFetch struct {
	done chan struct{}
	cert *x509.Certificate
	err  error
	// again: the fetch ended because its caller's context did; a waiter
	// with a live context fetches itself.
	again bool
}

// NewVerifier returns a Verifier configured by cfg, or an error that
// names the field to fix.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	switch {
	case cfg.FetchTimeout < 0:
		return nil, fmt.Errorf("envelope: VerifierConfig.FetchTimeout %s is negative; leave it 0 for 10s", cfg.FetchTimeout)
	case cfg.CacheSize < 0:
		return nil, fmt.Errorf("envelope: VerifierConfig.CacheSize %d is negative; leave it 0 for 32", cfg.CacheSize)
	}
	timeout := cmp.Or(cfg.FetchTimeout, 10*time.Second)
	var client http.Client
	if cfg.HTTPClient != nil {
		client = *cfg.HTTPClient
	} else {
		client.Timeout = timeout
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return errRedirect }
	return &Verifier{
		client:   &client,
		timeout:  timeout,
		size:     cmp.Or(cfg.CacheSize, 32),
		cache:    map[string]*list.Element{},
		lru:      list.New(),
		inflight: map[string]*certFetch{},
	}, nil
}

var errRedirect = errors.New("redirect refused")

// Verify checks the signature of the SNS message body: a Notification,
// SubscriptionConfirmation or UnsubscribeConfirmation as SNS delivers it
// to SQS. It returns nil when the signature is valid; an error wrapping
// [ErrUnverified] when it is not (or the body is no SNS message); and any
// other error when the signing certificate could not be fetched, which
// may heal by trying again.
func (v *Verifier) Verify(ctx context.Context, body string) error {
	env, _, _, sns, err := parse(body)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUnverified, err)
	case env == nil || sns == nil:
		return fmt.Errorf("%w: not an SNS message", ErrUnverified)
	}
	return v.verify(ctx, sns)
}

func unverified(e *snsEnvelope, format string, args ...any) error {
	return fmt.Errorf("%w: SNS %s %q: %s", ErrUnverified, e.Type, e.MessageID, fmt.Sprintf(format, args...))
}

func (v *Verifier) verify(ctx context.Context, e *snsEnvelope) error {
	var hash crypto.Hash
	switch e.SignatureVersion {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return unverified(e, "SignatureVersion %q, want 1 or 2", e.SignatureVersion)
	}
	s, err := stringToSign(e)
	if err != nil {
		return unverified(e, "%v", err)
	}
	sig, err := base64.StdEncoding.DecodeString(e.Signature)
	if err != nil || len(sig) == 0 {
		return unverified(e, "no base64 Signature")
	}
	if err := checkCertURL(e.SigningCertURL, v.allowHost); err != nil {
		return unverified(e, "%v", err)
	}
	cert, err := v.cert(ctx, e.SigningCertURL)
	if err != nil {
		return err // wraps ErrUnverified when SNS's host answered and the answer will not change
	}
	if err := usable(cert, time.Now()); err != nil {
		return unverified(e, "SigningCertURL %q: %v", e.SigningCertURL, err)
	}
	var digest []byte
	if hash == crypto.SHA1 {
		d := sha1.Sum([]byte(s))
		digest = d[:]
	} else {
		d := sha256.Sum256([]byte(s))
		digest = d[:]
	}
	if err := rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), hash, digest, sig); err != nil {
		return unverified(e, "the signature does not match the message")
	}
	return nil
}

// stringToSign is the text SNS signs, as AWS documents it ("Verifying the
// signatures of Amazon SNS messages"): for a Notification the keys
// Message, MessageId, Subject (only if present), Timestamp, TopicArn and
// Type; for a SubscriptionConfirmation or UnsubscribeConfirmation
// Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn and Type;
// each key and each value followed by a newline. Values are the decoded
// JSON strings.
func stringToSign(e *snsEnvelope) (string, error) {
	type kv struct {
		k string
		v *string
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var pairs []kv
	switch e.Type {
	case typeNotification:
		pairs = []kv{{"Message", e.Message}, {"MessageId", str(e.MessageID)}, {"Subject", e.Subject},
			{"Timestamp", str(e.Timestamp)}, {"TopicArn", str(e.TopicArn)}, {"Type", str(e.Type)}}
	case typeSubscribe, typeUnsubscribe:
		pairs = []kv{{"Message", e.Message}, {"MessageId", str(e.MessageID)}, {"SubscribeURL", str(e.SubscribeURL)},
			{"Timestamp", str(e.Timestamp)}, {"Token", str(e.Token)}, {"TopicArn", str(e.TopicArn)}, {"Type", str(e.Type)}}
	default:
		return "", fmt.Errorf("type %q has no signature", e.Type)
	}
	var b strings.Builder
	for _, p := range pairs {
		if p.v == nil {
			if p.k == "Subject" {
				continue
			}
			return "", fmt.Errorf("no %s", p.k)
		}
		b.WriteString(p.k)
		b.WriteByte('\n')
		b.WriteString(*p.v)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// snsRegion is an AWS region name: us-east-1, eu-central-2, us-gov-west-1,
// cn-northwest-1.
var snsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// isSNSHost reports whether host (lower case, without port) is SNS's own:
// sns.<region>.amazonaws.com, or sns.cn-<region>.amazonaws.com.cn in the
// China partition. It is stricter than AWS's SDK validators' patterns
// (which accept any label of letters, digits and dashes as the region),
// never looser: nothing under amazonaws.com but SNS's regional endpoints,
// which S3 bucket hosts, for one, are not.
func isSNSHost(host string) bool {
	rest, ok := strings.CutPrefix(host, "sns.")
	if !ok {
		return false
	}
	if region, ok := strings.CutSuffix(rest, ".amazonaws.com.cn"); ok {
		return strings.HasPrefix(region, "cn-") && snsRegion.MatchString(region)
	}
	region, ok := strings.CutSuffix(rest, ".amazonaws.com")
	return ok && !strings.HasPrefix(region, "cn-") && snsRegion.MatchString(region)
}

// checkCertURL refuses a SigningCertURL that is not an https URL of a .pem
// file on SNS's own host (allowHost, when not nil, decides the host
// instead: tests only). Nothing is fetched before it passes.
func checkCertURL(raw string, allowHost func(string) bool) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("SigningCertURL %q is not a URL", raw)
	case u.Scheme != "https":
		return fmt.Errorf("SigningCertURL %q is not https", raw)
	case u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || !strings.HasSuffix(u.Path, ".pem"):
		return fmt.Errorf("SigningCertURL %q is not a .pem file's URL", raw)
	}
	ok := false
	if allowHost != nil {
		ok = allowHost(u.Host)
	} else {
		ok = u.Port() == "" && isSNSHost(strings.ToLower(u.Hostname()))
	}
	if !ok {
		return fmt.Errorf("SigningCertURL %q is not on SNS's own host (sns.<region>.amazonaws.com or sns.cn-<region>.amazonaws.com.cn)", raw)
	}
	return nil
}

// cert returns the certificate at rawURL, from the cache or fetched once
// however many verifications ask for it at the same time.
func (v *Verifier) cert(ctx context.Context, rawURL string) (*x509.Certificate, error) {
	for {
		v.mu.Lock()
		if el, ok := v.cache[rawURL]; ok {
			v.lru.MoveToFront(el)
			c := el.Value.(*cachedCert).cert
			v.mu.Unlock()
			return c, nil
		}
		f, waiting := v.inflight[rawURL]
		if !waiting {
			f = &certFetch{done: make(chan struct{})}
			v.inflight[rawURL] = f
		}
		v.mu.Unlock()
		if !waiting {
			return v.fetchShared(ctx, rawURL, f)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("envelope: wait for SNS signing certificate: %w", context.Cause(ctx))
		}
		if !f.again {
			return f.cert, f.err
		}
	}
}

// fetchShared runs the fetch f that others may wait for, caches its
// certificate, and wakes them.
func (v *Verifier) fetchShared(ctx context.Context, rawURL string, f *certFetch) (*x509.Certificate, error) {
	f.err = errors.New("envelope: SNS signing certificate fetch did not finish")
	defer func() {
		v.mu.Lock()
		delete(v.inflight, rawURL)
		if f.err == nil {
			v.remember(rawURL, f.cert)
		}
		v.mu.Unlock()
		close(f.done)
	}()
	f.cert, f.err = v.fetch(ctx, rawURL)
	f.again = f.err != nil && ctx.Err() != nil
	return f.cert, f.err
}

// remember caches cert, dropping the least recently used beyond the
// bound. v.mu is held.
func (v *Verifier) remember(rawURL string, cert *x509.Certificate) {
	v.cache[rawURL] = v.lru.PushFront(&cachedCert{url: rawURL, cert: cert})
	for v.lru.Len() > v.size {
		old := v.lru.Remove(v.lru.Back()).(*cachedCert)
		delete(v.cache, old.url)
	}
}

// fetch downloads and parses the certificate at rawURL. What SNS's host
// answers definitively (no such certificate, not a certificate SNS signs
// with) wraps ErrUnverified; what may heal (network, timeout, 5xx,
// throttling) does not.
func (v *Verifier) fetch(ctx context.Context, rawURL string) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: SigningCertURL %q: %v", ErrUnverified, rawURL, err)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		if errors.Is(err, errRedirect) {
			return nil, fmt.Errorf("%w: SigningCertURL %q redirects", ErrUnverified, rawURL)
		}
		return nil, fmt.Errorf("envelope: fetch SNS signing certificate %q: %w", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return nil, fmt.Errorf("%w: SigningCertURL %q: HTTP status %d", ErrUnverified, rawURL, resp.StatusCode)
		}
		return nil, fmt.Errorf("envelope: fetch SNS signing certificate %q: HTTP status %d", rawURL, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCertBytes+1))
	if err != nil {
		return nil, fmt.Errorf("envelope: fetch SNS signing certificate %q: %w", rawURL, err)
	}
	if len(b) > maxCertBytes {
		return nil, fmt.Errorf("%w: SigningCertURL %q: larger than %d bytes", ErrUnverified, rawURL, maxCertBytes)
	}
	cert, err := parseCert(b)
	if err != nil {
		return nil, fmt.Errorf("%w: SigningCertURL %q: %v", ErrUnverified, rawURL, err)
	}
	if err := usable(cert, time.Now()); err != nil {
		return nil, fmt.Errorf("%w: SigningCertURL %q: %v", ErrUnverified, rawURL, err)
	}
	return cert, nil
}

// parseCert reads a PEM X.509 certificate with an RSA key that may sign.
func parseCert(b []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate: %v", err)
	}
	if _, ok := cert.PublicKey.(*rsa.PublicKey); !ok {
		return nil, fmt.Errorf("certificate key is %T, want RSA", cert.PublicKey)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return nil, errors.New("certificate may not sign (no digitalSignature key usage)")
	}
	return cert, nil
}

// usable checks the certificate's validity period at now.
func usable(cert *x509.Certificate, now time.Time) error {
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return fmt.Errorf("certificate valid from %s to %s, not now", cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}
