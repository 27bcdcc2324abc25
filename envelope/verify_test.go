package envelope_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/envelope"
)

// testKey is one RSA key for the whole package: making one costs more than
// every test that uses it.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// certPEM is a self-signed certificate for key, valid from notBefore to
// notAfter, as SNS serves its signing certificate.
func certPEM(t testing.TB, key crypto.Signer, notBefore, notAfter time.Time) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sns.amazonaws.com", Organization: []string{"test"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// certServer serves signing certificates over TLS with its own
// self-signed server certificate and counts the requests it gets.
type certServer struct {
	srv  *httptest.Server
	hits atomic.Int64
	pem  []byte
}

const certPath = "/SimpleNotificationService-0123456789abcdef.pem"

func newCertServer(t *testing.T, pemBytes []byte) *certServer {
	t.Helper()
	cs := &certServer{pem: pemBytes}
	cs.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.hits.Add(1)
		if !strings.HasSuffix(r.URL.Path, ".pem") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(cs.pem)
	}))
	t.Cleanup(cs.srv.Close)
	return cs
}

// url is the certificate URL on this server.
func (cs *certServer) url() string { return cs.srv.URL + certPath }

// verifier returns a Verifier that trusts this server's TLS certificate
// and accepts signing certificates from its host, as it accepts SNS's own
// hosts in production.
func (cs *certServer) verifier(t *testing.T, cfg envelope.VerifierConfig) *envelope.Verifier {
	t.Helper()
	cfg.HTTPClient = cs.srv.Client()
	v, err := envelope.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	envelope.AllowCertHostForTest(v, cs.srv.Listener.Addr().String())
	return v
}

// stringToSign is the string SNS signs, written here from AWS's
// documentation ("Verifying the signatures of Amazon SNS messages"),
// independently of the package: for a Notification, Message, MessageId,
// Subject (only if present), Timestamp, TopicArn, Type; for a
// SubscriptionConfirmation or UnsubscribeConfirmation, Message, MessageId,
// SubscribeURL, Timestamp, Token, TopicArn, Type; each name and each value
// followed by a newline.
func stringToSign(m map[string]string) string {
	keys := []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	if m["Type"] != "Notification" {
		keys = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		b.WriteString(k + "\n" + v + "\n")
	}
	return b.String()
}

// signed returns the JSON body of the SNS message m, signed with key in
// SignatureVersion version, its certificate at certURL.
func signed(t testing.TB, key *rsa.PrivateKey, version, certURL string, m map[string]string) string {
	t.Helper()
	s := stringToSign(m)
	var sig []byte
	var err error
	switch version {
	case "1":
		h := sha1.Sum([]byte(s))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, h[:])
	case "2":
		h := sha256.Sum256([]byte(s))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	out["SignatureVersion"] = version
	out["Signature"] = base64.StdEncoding.EncodeToString(sig)
	out["SigningCertURL"] = certURL
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// notification is an SNS Notification whose Message and Subject hold
// what a naive string-to-sign gets wrong: newlines, quotes, escapes and
// characters JSON encoders escape.
func notification() map[string]string {
	return map[string]string{
		"Type":      "Notification",
		"MessageId": "da41e39f-ea4d-435a-b922-c6aae3915ebe",
		"TopicArn":  "arn:aws:sns:us-west-2:123456789012:orders",
		"Subject":   "order <o-9> & \"more\"",
		"Message":   "{\"order\":\"o-9\",\"note\":\"line1\\nline2\"}\nsecond line\t✓",
		"Timestamp": "2026-11-30T12:00:00.123Z",
	}
}

func confirmation(typ string) map[string]string {
	return map[string]string{
		"Type":         typ,
		"MessageId":    "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
		"Token":        "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736",
		"TopicArn":     "arn:aws:sns:us-west-2:123456789012:orders",
		"Message":      "You have chosen to subscribe to the topic arn:aws:sns:us-west-2:123456789012:orders.\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		"SubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-west-2:123456789012:orders&Token=2336412f37",
		"Timestamp":    "2026-11-30T12:00:00.000Z",
	}
}

func without(m map[string]string, key string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// retouch sets key to value in the JSON object body.
func retouch(t *testing.T, body, key, value string) string {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatal(err)
	}
	f[key] = value
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// process runs body through Unwrap with opts and reports the outcome and
// whether the handler ran.
func process(t *testing.T, body string, opts envelope.Options) (consumertest.Result, *envelope.Envelope, bool) {
	t.Helper()
	var env *envelope.Envelope
	ran := false
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		ran, env = true, envelope.FromContext(ctx)
		return nil
	})
	return consumertest.Process(context.Background(), h, consumertest.NewMessage(body), envelope.Unwrap(opts)), env, ran
}

// The string to sign, as AWS documents it, for each kind of SNS message.
func TestStringToSignGolden(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"notification with subject", `{"Type":"Notification","MessageId":"m-1","TopicArn":"arn:aws:sns:us-east-1:1:t","Subject":"s\nx","Message":"a\"b\\c\u2713","Timestamp":"2026-11-30T12:00:00Z","UnsubscribeURL":"https://x","MessageAttributes":{"k":{"Type":"String","Value":"v"}}}`,
			"Message\na\"b\\c✓\nMessageId\nm-1\nSubject\ns\nx\nTimestamp\n2026-11-30T12:00:00Z\nTopicArn\narn:aws:sns:us-east-1:1:t\nType\nNotification\n"},
		{"notification without subject", `{"Type":"Notification","MessageId":"m-1","TopicArn":"t","Message":"","Timestamp":"2026-11-30T12:00:00.5Z"}`,
			"Message\n\nMessageId\nm-1\nTimestamp\n2026-11-30T12:00:00.5Z\nTopicArn\nt\nType\nNotification\n"},
		{"subscription confirmation", `{"Type":"SubscriptionConfirmation","MessageId":"m-2","Token":"tok","TopicArn":"t","Subject":"ignored","Message":"hi","SubscribeURL":"https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription","Timestamp":"2026-11-30T12:00:00Z"}`,
			"Message\nhi\nMessageId\nm-2\nSubscribeURL\nhttps://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription\nTimestamp\n2026-11-30T12:00:00Z\nToken\ntok\nTopicArn\nt\nType\nSubscriptionConfirmation\n"},
		{"unsubscribe confirmation", `{"Type":"UnsubscribeConfirmation","MessageId":"m-3","Token":"tok","TopicArn":"t","Message":"bye","SubscribeURL":"https://s","Timestamp":"2026-11-30T12:00:00Z"}`,
			"Message\nbye\nMessageId\nm-3\nSubscribeURL\nhttps://s\nTimestamp\n2026-11-30T12:00:00Z\nToken\ntok\nTopicArn\nt\nType\nUnsubscribeConfirmation\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.StringToSignForTest(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("string to sign\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// A Notification signed with SignatureVersion 1 (SHA1withRSA) or 2
// (SHA256withRSA) by the certificate at its SigningCertURL is unwrapped.
func TestVerifiedNotification(t *testing.T) {
	cs := newCertServer(t, certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	v := cs.verifier(t, envelope.VerifierConfig{})
	for _, version := range []string{"1", "2"} {
		for _, m := range []map[string]string{notification(), without(notification(), "Subject")} {
			t.Run("v"+version+"/subject="+m["Subject"], func(t *testing.T) {
				res, env, ran := process(t, signed(t, testKey(), version, cs.url(), m), envelope.Options{Verifier: v, Require: true})
				if res.Outcome != consumer.OutcomeAck || !ran {
					t.Fatalf("outcome %s, handler ran %v: %v", res.Outcome, ran, res.Err)
				}
				if env.Topic != m["TopicArn"] || env.ID != m["MessageId"] || env.Subject != m["Subject"] || !env.Verified {
					t.Fatalf("envelope %+v", env)
				}
			})
		}
	}
}

// Whatever the signature covers cannot change: each tampered copy of a
// signed Notification is dead-lettered, its handler never run.
func TestTamperedNotificationRejected(t *testing.T) {
	cs := newCertServer(t, certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	v := cs.verifier(t, envelope.VerifierConfig{})
	for _, version := range []string{"1", "2"} {
		good := signed(t, testKey(), version, cs.url(), notification())
		var fields map[string]any
		if err := json.Unmarshal([]byte(good), &fields); err != nil {
			t.Fatal(err)
		}
		tamper := map[string]func(map[string]any){
			"message":          func(f map[string]any) { f["Message"] = `{"order":"o-9","amount":1000000}` },
			"topic":            func(f map[string]any) { f["TopicArn"] = "arn:aws:sns:us-west-2:123456789012:payments" },
			"time":             func(f map[string]any) { f["Timestamp"] = "2026-12-01T12:00:00.123Z" },
			"message id":       func(f map[string]any) { f["MessageId"] = "00000000-0000-0000-0000-000000000000" },
			"subject removed":  func(f map[string]any) { delete(f, "Subject") },
			"subject changed":  func(f map[string]any) { f["Subject"] = "other" },
			"type":             func(f map[string]any) { f["Type"] = "SubscriptionConfirmation" },
			"version switched": func(f map[string]any) { f["SignatureVersion"] = map[string]string{"1": "2", "2": "1"}[version] },
			"no signature":     func(f map[string]any) { delete(f, "Signature") },
			"signature junk":   func(f map[string]any) { f["Signature"] = "not base64!" },
			"version 3":        func(f map[string]any) { f["SignatureVersion"] = "3" },
			"no version":       func(f map[string]any) { delete(f, "SignatureVersion") },
		}
		for name, change := range tamper {
			t.Run("v"+version+"/"+name, func(t *testing.T) {
				f := map[string]any{}
				for k, val := range fields {
					f[k] = val
				}
				change(f)
				b, _ := json.Marshal(f)
				res, _, ran := process(t, string(b), envelope.Options{Verifier: v})
				if ran || res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrUnverified) {
					t.Fatalf("handler ran %v, outcome %s, err %v; want a dead letter for an unverified envelope", ran, res.Outcome, res.Err)
				}
			})
		}
	}
	// The untampered message still passes, from the cache: one fetch.
	res, _, _ := process(t, signed(t, testKey(), "2", cs.url(), notification()), envelope.Options{Verifier: v})
	if res.Outcome != consumer.OutcomeAck {
		t.Fatalf("untampered: %s %v", res.Outcome, res.Err)
	}
	if n := cs.hits.Load(); n != 1 {
		t.Fatalf("certificate fetched %d times, want 1", n)
	}
}

// countingTransport fails every request and counts it.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.n.Add(1)
	return nil, errors.New("no network in this test")
}

// A certificate URL that is not https on one of SNS's own hosts is refused
// before anything is fetched: the production host check, no test hook.
func TestForeignCertURLRejectedWithoutFetching(t *testing.T) {
	tr := &countingTransport{}
	v, err := envelope.NewVerifier(envelope.VerifierConfig{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"https://evil.example.com/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com.evil.example.com/SimpleNotificationService-1.pem",
		"https://evilsns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://s3.amazonaws.com/sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://my-bucket.s3.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com:8443/SimpleNotificationService-1.pem",
		"https://user:pw@sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com./SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem?x=1",
		"https://sns.us-east-1.amazonaws.com/not-a-certificate",
		"https://sns.us-east-1.amazonaws.com.cn/SimpleNotificationService-1.pem",
		"https://sns.cn-north-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://127.0.0.1/SimpleNotificationService-1.pem",
		"http://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"ftp://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"//sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"",
	} {
		t.Run(u, func(t *testing.T) {
			res, _, ran := process(t, signed(t, testKey(), "2", u, notification()), envelope.Options{Verifier: v})
			if ran || res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrUnverified) {
				t.Fatalf("handler ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
			}
		})
	}
	if n := tr.n.Load(); n != 0 {
		t.Fatalf("%d certificate fetches for URLs that are not SNS's", n)
	}
}

// SNS's own hosts, in every partition, pass the production check (and are
// then fetched).
func TestSNSCertHostsAccepted(t *testing.T) {
	for _, u := range []string{
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem",
		"https://sns.eu-central-2.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.ap-southeast-4.amazonaws.com/SimpleNotificationService-1.pem",
		"https://SNS.US-WEST-2.AMAZONAWS.COM/SimpleNotificationService-1.pem",
		"https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-1.pem",
		"https://sns.cn-northwest-1.amazonaws.com.cn/SimpleNotificationService-1.pem",
	} {
		if err := envelope.CheckCertURLForTest(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	// The check runs before the fetch, and a URL that passes is fetched.
	tr := &countingTransport{}
	v, _ := envelope.NewVerifier(envelope.VerifierConfig{HTTPClient: &http.Client{Transport: tr}})
	res, _, _ := process(t, signed(t, testKey(), "1", "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem", notification()), envelope.Options{Verifier: v})
	if tr.n.Load() != 1 || res.Outcome != consumer.OutcomeRetry {
		t.Fatalf("fetches %d, outcome %s (%v); want one fetch and a retry for a fetch that failed", tr.n.Load(), res.Outcome, res.Err)
	}
}

// https is required even where a test allows the host: the hook replaces
// the host check only.
func TestHTTPSchemeRejected(t *testing.T) {
	var hits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write(certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	}))
	defer plain.Close()
	v, err := envelope.NewVerifier(envelope.VerifierConfig{HTTPClient: plain.Client()})
	if err != nil {
		t.Fatal(err)
	}
	envelope.AllowCertHostForTest(v, plain.Listener.Addr().String())
	res, _, ran := process(t, signed(t, testKey(), "2", plain.URL+certPath, notification()), envelope.Options{Verifier: v})
	if ran || res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrUnverified) || !strings.Contains(res.Failure.Error, "https") {
		t.Fatalf("handler ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d fetches over http", hits.Load())
	}
}

// One fetch serves many messages, sequential and concurrent.
func TestCertificateCached(t *testing.T) {
	cs := newCertServer(t, certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	v := cs.verifier(t, envelope.VerifierConfig{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 20 {
		m := notification()
		m["MessageId"] = fmt.Sprint("m-", i)
		body := signed(t, testKey(), []string{"1", "2"}[i%2], cs.url(), m)
		wg.Go(func() {
			if err := v.Verify(context.Background(), body); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	for i := range 30 {
		m := notification()
		m["MessageId"] = fmt.Sprint("n-", i)
		if err := v.Verify(context.Background(), signed(t, testKey(), "2", cs.url(), m)); err != nil {
			t.Fatal(err)
		}
	}
	if failed.Load() != 0 || cs.hits.Load() != 1 {
		t.Fatalf("%d failed, %d fetches; want 0 failed and 1 fetch for 50 messages", failed.Load(), cs.hits.Load())
	}
}

// The cache holds at most CacheSize certificates: the least recently used
// one is fetched again.
func TestCertificateCacheBounded(t *testing.T) {
	cs := newCertServer(t, certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	v := cs.verifier(t, envelope.VerifierConfig{CacheSize: 2})
	urls := []string{cs.srv.URL + "/a.pem", cs.srv.URL + "/b.pem", cs.srv.URL + "/c.pem"}
	for round := range 2 {
		for _, u := range urls {
			if err := v.Verify(context.Background(), signed(t, testKey(), "2", u, notification())); err != nil {
				t.Fatal(round, u, err)
			}
			if n := envelope.CachedCertsForTest(v); n > 2 {
				t.Fatalf("%d certificates cached, want at most 2", n)
			}
		}
	}
	if n := cs.hits.Load(); n != 6 {
		t.Fatalf("%d fetches, want 6 (each of 3 URLs twice through a cache of 2)", n)
	}
	// Within the bound, a repeat is a hit.
	if err := v.Verify(context.Background(), signed(t, testKey(), "2", urls[2], notification())); err != nil || cs.hits.Load() != 6 {
		t.Fatalf("repeat of the latest URL: %v, %d fetches", err, cs.hits.Load())
	}
}

// A certificate that is not what SNS signs with is refused: a body that
// is not PEM, an expired certificate, a key that is not RSA, a body over
// the size bound.
func TestBadCertificateRejected(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"not pem":   []byte("hello"),
		"expired":   certPEM(t, testKey(), time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)),
		"not yet":   certPEM(t, testKey(), time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour)),
		"ecdsa":     certPEM(t, ecKey, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)),
		"too large": append(certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)), make([]byte, 1<<20)...),
	} {
		t.Run(name, func(t *testing.T) {
			cs := newCertServer(t, body)
			v := cs.verifier(t, envelope.VerifierConfig{})
			res, _, ran := process(t, signed(t, testKey(), "2", cs.url(), notification()), envelope.Options{Verifier: v})
			if ran || res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrUnverified) {
				t.Fatalf("handler ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
			}
		})
	}
}

// A certificate signed by another key does not verify.
func TestOtherKeyRejected(t *testing.T) {
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cs := newCertServer(t, certPEM(t, other, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	v := cs.verifier(t, envelope.VerifierConfig{})
	res, _, ran := process(t, signed(t, testKey(), "1", cs.url(), notification()), envelope.Options{Verifier: v})
	if ran || res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrUnverified) {
		t.Fatalf("handler ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
	}
}

// A fetch that fails (SNS unreachable, a 5xx) is a transient failure: the
// message is retried, not dead-lettered, and the failure is not cached.
func TestCertFetchFailureRetried(t *testing.T) {
	good := certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	var fail atomic.Bool
	fail.Store(true)
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		if fail.Load() {
			http.Error(w, "slow down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(good)
	}))
	defer srv.Close()
	v, _ := envelope.NewVerifier(envelope.VerifierConfig{HTTPClient: srv.Client()})
	envelope.AllowCertHostForTest(v, srv.Listener.Addr().String())
	body := signed(t, testKey(), "2", srv.URL+certPath, notification())
	res, _, ran := process(t, body, envelope.Options{Verifier: v})
	if ran || res.Outcome != consumer.OutcomeRetry || errors.Is(res.Err, envelope.ErrUnverified) {
		t.Fatalf("handler ran %v, outcome %s, err %v; want a retry", ran, res.Outcome, res.Err)
	}
	fail.Store(false)
	if res, _, ran := process(t, body, envelope.Options{Verifier: v}); !ran || res.Outcome != consumer.OutcomeAck {
		t.Fatalf("after SNS recovered: ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
	}
	if hits.Load() != 2 {
		t.Fatalf("%d fetches, want 2", hits.Load())
	}
}

// blockingTransport answers only when the request is cancelled.
type blockingTransport struct{}

func (blockingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// A fetch that hangs gives up after FetchTimeout, and the message is
// retried.
func TestCertFetchTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v, err := envelope.NewVerifier(envelope.VerifierConfig{HTTPClient: &http.Client{Transport: blockingTransport{}}, FetchTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = v.Verify(context.Background(), signed(t, testKey(), "2", "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem", notification()))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, envelope.ErrUnverified) {
			t.Fatalf("err %v, want a deadline that is not a verdict on the message", err)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Fatalf("gave up after %s, want the 3s FetchTimeout", waited)
		}
	})
}

func TestNewVerifierRejectsBadConfig(t *testing.T) {
	for _, cfg := range []envelope.VerifierConfig{{CacheSize: -1}, {FetchTimeout: -time.Second}} {
		if _, err := envelope.NewVerifier(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// SubscriptionConfirmation and UnsubscribeConfirmation messages are not
// malformed notifications: they are acked without running the handler or
// confirming anything, and logged at info level with their topic (never
// their token).
func TestConfirmationAckedAndLogged(t *testing.T) {
	cs := newCertServer(t, certPEM(t, testKey(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	v := cs.verifier(t, envelope.VerifierConfig{})
	for _, typ := range []string{"SubscriptionConfirmation", "UnsubscribeConfirmation"} {
		for _, verify := range []bool{false, true} {
			t.Run(fmt.Sprint(typ, "/verify=", verify), func(t *testing.T) {
				core, logs := observer.New(zapcore.InfoLevel)
				opts := envelope.Options{Logger: zap.New(core), Require: true}
				if verify {
					opts.Verifier = v
				}
				res, _, ran := process(t, signed(t, testKey(), "2", cs.url(), confirmation(typ)), opts)
				if ran || res.Outcome != consumer.OutcomeAck {
					t.Fatalf("handler ran %v, outcome %s, err %v; want an ack without the handler", ran, res.Outcome, res.Err)
				}
				entries := logs.All()
				if len(entries) != 1 || entries[0].Level != zapcore.InfoLevel {
					t.Fatalf("logs %+v, want one info line", entries)
				}
				f := entries[0].ContextMap()
				if f["topic"] != "arn:aws:sns:us-west-2:123456789012:orders" || f["sns_type"] != typ || f["verified"] != verify {
					t.Fatalf("log fields %v", f)
				}
				if line := fmt.Sprint(entries[0].Message, f); strings.Contains(line, "2336412f37") {
					t.Fatalf("the log carries the confirmation token: %s", line)
				}
			})
		}
		t.Run(typ+"/forged", func(t *testing.T) {
			body := retouch(t, signed(t, testKey(), "2", cs.url(), confirmation(typ)), "TopicArn", "arn:aws:sns:us-west-2:123456789012:payments")
			res, _, _ := process(t, body, envelope.Options{Verifier: v})
			if res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrUnverified) {
				t.Fatalf("outcome %s, err %v", res.Outcome, res.Err)
			}
		})
	}
	// The fixture (unsigned) is acked without a Verifier.
	if res, _, ran := process(t, fixture(t, "sns-subscription-confirmation.json"), envelope.Options{}); ran || res.Outcome != consumer.OutcomeAck {
		t.Fatalf("fixture: handler ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
	}
}

// EventBridge events carry no signature: a Verifier lets them through (the
// queue policy is what restricts who sends them).
func TestEventBridgeWithVerifier(t *testing.T) {
	tr := &countingTransport{}
	v, _ := envelope.NewVerifier(envelope.VerifierConfig{HTTPClient: &http.Client{Transport: tr}})
	res, env, ran := process(t, fixture(t, "eventbridge-event.json"), envelope.Options{Verifier: v})
	if !ran || res.Outcome != consumer.OutcomeAck || env.Verified || tr.n.Load() != 0 {
		t.Fatalf("ran %v, outcome %s, env %+v, fetches %d", ran, res.Outcome, env, tr.n.Load())
	}
}

// An SNS message type this package does not know is malformed.
func TestUnknownSNSTypeMalformed(t *testing.T) {
	res, _, ran := process(t, `{"Type":"Surprise","MessageId":"m","TopicArn":"t","Message":"x"}`, envelope.Options{})
	if ran || res.Outcome != consumer.OutcomeDeadLetter || !errors.Is(res.Err, envelope.ErrMalformed) {
		t.Fatalf("ran %v, outcome %s, err %v", ran, res.Outcome, res.Err)
	}
}

func FuzzCheckCertURL(f *testing.F) {
	for _, u := range []string{
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com.evil.example.com/x.pem",
		"http://sns.us-east-1.amazonaws.com/x.pem",
		"https://sns.us-east-1.amazonaws.com%2eevil.com/x.pem",
		"https://sns.us-east-1.amazonaws.com\\@evil.com/x.pem",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if envelope.CheckCertURLForTest(raw) != nil {
			return
		}
		// Whatever passes is fetched from SNS's own host over https, and
		// net/http reads the URL as the check did.
		req, err := http.NewRequest(http.MethodGet, raw, nil)
		if err != nil {
			t.Fatalf("accepted %q, which net/http cannot request: %v", raw, err)
		}
		host := strings.ToLower(req.URL.Host) // host names are case-insensitive
		if req.URL.Scheme != "https" || !strings.HasPrefix(host, "sns.") ||
			!(strings.HasSuffix(host, ".amazonaws.com") || strings.HasSuffix(host, ".amazonaws.com.cn")) ||
			strings.ContainsAny(host, "@:%\\/") || req.URL.User != nil {
			t.Fatalf("accepted %q (host %q)", raw, host)
		}
	})
}
