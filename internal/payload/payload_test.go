package payload_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/payload/payloadtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExtendedClientFixtures checks each golden message three ways: the
// port of its library's writer produces it byte for byte, sqsonce's
// decoder reads the body its producer sent, and the ports of both
// libraries' readers read it too.
func TestExtendedClientFixtures(t *testing.T) {
	fx, err := payloadtest.Fixtures()
	if err != nil {
		t.Fatal(err)
	}
	if len(fx) < 6 {
		t.Fatalf("%d fixtures, want the 6 of testdata/extended-clients.jsonc", len(fx))
	}
	ctx := context.Background()
	for _, f := range fx {
		t.Run(f.Name, func(t *testing.T) {
			s3 := &payloadtest.S3{}
			s3.Put(f.Object.Bucket, f.Object.Key, f.Object.Content)
			attrs := f.SQSAttributes()

			// The writer's port gives the fixture exactly.
			user := maps.Clone(attrs)
			delete(user, payload.AttrSize)
			delete(user, payload.AttrLegacySize)
			legacy := attrs[payload.AttrLegacySize].StringValue != nil
			var body string
			var got map[string]types.MessageAttributeValue
			if strings.HasPrefix(f.Name, "java") {
				body, got, err = payloadtest.JavaSend(f.Object.Content, user, f.Object.Bucket, f.Object.Key, legacy)
				if strings.HasPrefix(f.Name, "java-1.") {
					// Version 1 typed the pointer with its own class.
					body = strings.Replace(body, payload.PointerClass, "com.amazon.sqs.javamessaging.MessageS3Pointer", 1)
				}
			} else {
				body, got, err = payloadtest.PythonSend(f.Object.Content, user, f.Object.Bucket, f.Object.Key, legacy)
			}
			if err != nil {
				t.Fatal(err)
			}
			if body != f.Body {
				t.Errorf("the writer's port gives body\n%s\nthe fixture has\n%s", body, f.Body)
			}
			if !sameAttrs(got, attrs) {
				t.Errorf("the writer's port gives attributes %v, the fixture has %v", show(got), show(attrs))
			}

			// sqsonce reads it.
			res, err := payload.Decoder{S3: s3}.Decode(ctx, f.Body, attrs)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if res.Body != f.Object.Content || res.Pointer == nil || res.Pointer.Bucket != f.Object.Bucket || res.Pointer.Key != f.Object.Key {
				t.Errorf("Decode = %+v, want the object's content from s3://%s/%s", res, f.Object.Bucket, f.Object.Key)
			}

			// Both libraries read it.
			for name, recv := range map[string]func(context.Context, payloadtest.GetAPI, string, map[string]types.MessageAttributeValue, string) (payloadtest.Received, error){
				"java": payloadtest.JavaReceive, "python": payloadtest.PythonReceive,
			} {
				r, err := recv(ctx, s3, f.Body, attrs, "AQEBhandle")
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if r.Body != f.Object.Content {
					t.Errorf("%s reads %q", name, r.Body)
				}
			}
		})
	}
}

// TestSqsonceReadByExtendedClients checks the pointer message sqsonce
// writes against the ports of both libraries' readers: they fetch the
// body, drop only the size attribute, and their receipt handle gives back
// SQS's own.
func TestSqsonceReadByExtendedClients(t *testing.T) {
	ctx := context.Background()
	s3 := &payloadtest.S3{}
	body := strings.Repeat("Grüße, ", 1000)
	p, err := payload.Store(ctx, s3, "sqsonce-payloads", "jobs/", body)
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]types.MessageAttributeValue{
		"sqsonce-id":     payload.StringAttr("job-1"),
		payload.AttrSize: payload.NumberAttr(int64(len(body))),
	}
	// What SQS hands out: standard base64, no '-'.
	const handle = "AQEBzWwaftRI0KuVm4tP+/7q1rGgNqicHq3e1xZW8Xk+Zh2P4hB6NRWkKnjMk0Xq6xxqg=="
	for name, recv := range map[string]func(context.Context, payloadtest.GetAPI, string, map[string]types.MessageAttributeValue, string) (payloadtest.Received, error){
		"java": payloadtest.JavaReceive, "python": payloadtest.PythonReceive,
	} {
		r, err := recv(ctx, s3, p.Body(), attrs, handle)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Body != body || r.Bucket != p.Bucket || r.Key != p.Key {
			t.Errorf("%s reads %d bytes from s3://%s/%s, want %d from %s", name, len(r.Body), r.Bucket, r.Key, len(body), p)
		}
		if _, ok := r.Attributes["sqsonce-id"]; !ok || len(r.Attributes) != 1 {
			t.Errorf("%s leaves attributes %v, want sqsonce-id alone", name, show(r.Attributes))
		}
		orig := payloadtest.JavaOriginalReceiptHandle(r.ReceiptHandle)
		if name == "python" {
			orig = payloadtest.PythonOriginalReceiptHandle(r.ReceiptHandle)
		}
		if orig != handle {
			t.Errorf("%s's receipt handle gives back %q, want %q", name, orig, handle)
		}
	}
	if want := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"sqsonce-payloads","s3Key":"` + p.Key + `"}]`; p.Body() != want {
		t.Errorf("pointer body %s, want %s", p.Body(), want)
	}
}

func TestParsePointerRefuses(t *testing.T) {
	for _, body := range []string{
		``, `{}`, `[]`, `["software.amazon.payloadoffloading.PayloadS3Pointer"]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b"}]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"","s3Key":"k"}]`,
		`["com.example.Other",{"s3BucketName":"b","s3Key":"k"}]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"},1]`,
		`[1,{"s3BucketName":"b","s3Key":"k"}]`,
	} {
		if p, err := payload.ParsePointer(body); !errors.Is(err, payload.ErrNotPointer) {
			t.Errorf("ParsePointer(%q) = %v, %v; want ErrNotPointer", body, p, err)
		}
	}
	p, err := payload.ParsePointer(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3Key":"k","extra":true,"s3BucketName":"b"}]`)
	if err != nil || p != (payload.Pointer{Bucket: "b", Key: "k"}) {
		t.Errorf("fields in another order with an extra one: %v, %v", p, err)
	}
}

// TestDecodeFailures: each way a body cannot be had is classified, with
// the object in the reason.
func TestDecodeFailures(t *testing.T) {
	ctx := context.Background()
	ptr := payload.Pointer{Bucket: "b", Key: "gone"}
	pointerAttrs := map[string]types.MessageAttributeValue{payload.AttrSize: payload.NumberAttr(10)}
	tests := []struct {
		name      string
		dec       payload.Decoder
		body      string
		attrs     map[string]types.MessageAttributeValue
		permanent bool
		reason    string
	}{
		{"missing object", payload.Decoder{S3: &payloadtest.S3{}}, ptr.Body(), pointerAttrs, true, "s3://b/gone"},
		{"throttled", payload.Decoder{S3: &payloadtest.S3{GetErr: payloadtest.Throttled}}, ptr.Body(), pointerAttrs, false, "SlowDown"},
		{"no client", payload.Decoder{Hint: ": set X"}, ptr.Body(), pointerAttrs, true, "no S3 client is configured: set X"},
		{"not a pointer", payload.Decoder{S3: &payloadtest.S3{}}, "hello", pointerAttrs, true, "not an S3 pointer"},
		{"declared over the cap", payload.Decoder{S3: &payloadtest.S3{}, MaxBytes: 5}, ptr.Body(), pointerAttrs, true, "over the size cap"},
		{"unknown encoding", payload.Decoder{}, "x", map[string]types.MessageAttributeValue{payload.AttrEncoding: payload.StringAttr("gzip")}, true, `unknown sqsonce-encoding "gzip"`},
		{"not base64", payload.Decoder{}, "not base64!", map[string]types.MessageAttributeValue{payload.AttrEncoding: payload.StringAttr("zstd")}, true, "does not decode"},
		{"not zstd", payload.Decoder{}, "aGVsbG8gd29ybGQ=", map[string]types.MessageAttributeValue{payload.AttrEncoding: payload.StringAttr("zstd")}, true, "does not decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.dec.Decode(ctx, tt.body, tt.attrs)
			var pe *payload.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Decode error %v, want a *payload.Error", err)
			}
			if pe.Permanent != tt.permanent {
				t.Errorf("permanent = %v, want %v (%v)", pe.Permanent, tt.permanent, err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
			if want := map[bool]string{true: payload.ClassPayload, false: ""}[tt.permanent]; pe.FailureClass() != want {
				t.Errorf("FailureClass() = %q, want %q", pe.FailureClass(), want)
			}
		})
	}
}

func TestObjectOverCap(t *testing.T) {
	s3 := &payloadtest.S3{}
	s3.Put("b", "k", strings.Repeat("x", 100))
	// The attribute understates the size: the object's length decides.
	_, err := payload.Decoder{S3: s3, MaxBytes: 50}.Decode(context.Background(), payload.Pointer{Bucket: "b", Key: "k"}.Body(),
		map[string]types.MessageAttributeValue{payload.AttrSize: payload.NumberAttr(10)})
	if !errors.Is(err, payload.ErrTooLarge) {
		t.Fatalf("Decode = %v, want ErrTooLarge", err)
	}
}

func TestCompressRoundTrip(t *testing.T) {
	body := strings.Repeat(`{"id":"credit-1","account":"acct-001","amount":42},`, 400)
	z, ok := payload.Compress(body)
	if !ok || len(z) >= len(body) {
		t.Fatalf("Compress: %d bytes from %d, ok %v", len(z), len(body), ok)
	}
	res, err := payload.Decoder{}.Decode(context.Background(), z, map[string]types.MessageAttributeValue{payload.AttrEncoding: payload.StringAttr(payload.EncodingZstd)})
	if err != nil || res.Body != body || res.Encoding != payload.EncodingZstd {
		t.Fatalf("Decode: %v, body equal %v", err, res.Body == body)
	}
	if _, ok := payload.Compress("short and random: q8Zr"); ok {
		t.Error("a body that does not shrink was compressed")
	}
	// The decompressed size is capped.
	if _, err := payload.Decompress(z, 1000); !errors.Is(err, payload.ErrTooLarge) {
		t.Errorf("Decompress over the cap = %v, want ErrTooLarge", err)
	}
}

// TestCompressedInS3 is a body too large even compressed: stored
// compressed, read back through both steps.
func TestCompressedInS3(t *testing.T) {
	ctx := context.Background()
	s3 := &payloadtest.S3{}
	body := strings.Repeat("abcdefghij", 10000)
	z, _ := payload.Compress(body)
	p, err := payload.Store(ctx, s3, "b", "", z)
	if err != nil {
		t.Fatal(err)
	}
	res, err := payload.Decoder{S3: s3}.Decode(ctx, p.Body(), map[string]types.MessageAttributeValue{
		payload.AttrSize: payload.NumberAttr(int64(len(z))), payload.AttrEncoding: payload.StringAttr(payload.EncodingZstd),
	})
	if err != nil || res.Body != body || res.Pointer == nil {
		t.Fatalf("Decode: %v (%d bytes)", err, len(res.Body))
	}
}

func TestKeyPrefixAndBucket(t *testing.T) {
	for _, p := range []string{"", "jobs/", "a-b_c.d/"} {
		if err := payload.CheckKeyPrefix(p); err != nil {
			t.Errorf("CheckKeyPrefix(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"/x", ".x", "a..b", "a b", strings.Repeat("a", 989)} {
		if err := payload.CheckKeyPrefix(p); err == nil {
			t.Errorf("CheckKeyPrefix(%q) = nil", p)
		}
	}
	for _, b := range []string{"ab", "Upper", "-a-", "a..b", strings.Repeat("a", 64)} {
		if err := payload.CheckBucket(b); err == nil {
			t.Errorf("CheckBucket(%q) = nil", b)
		}
	}
	if err := payload.CheckBucket("sqsonce-payloads"); err != nil {
		t.Error(err)
	}
}

func sameAttrs(a, b map[string]types.MessageAttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || aws.ToString(v.DataType) != aws.ToString(w.DataType) || aws.ToString(v.StringValue) != aws.ToString(w.StringValue) {
			return false
		}
	}
	return true
}

func show(m map[string]types.MessageAttributeValue) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+aws.ToString(v.DataType)+":"+aws.ToString(v.StringValue))
	}
	slices.Sort(out)
	return out
}
