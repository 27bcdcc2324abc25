package payload_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/payload/payloadtest"
)

// FuzzDecode feeds hostile bodies and attributes to the decoder: it never
// panics, every failure is a classified *payload.Error, and what it
// returns is within the cap.
func FuzzDecode(f *testing.F) {
	z, _ := payload.Compress("hello hello hello hello hello hello hello hello")
	f.Add(z, "zstd", false, "")
	f.Add("aGVsbG8=", "zstd", false, "")
	f.Add("KLUv/QBYAQAA", "zstd", false, "")
	f.Add(payload.Pointer{Bucket: "b", Key: "k"}.Body(), "", true, "12")
	f.Add(payload.Pointer{Bucket: "b", Key: "z"}.Body(), "zstd", true, "-1")
	f.Add(`["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "b", "s3Key": "k"}]`, "", true, "x")
	f.Add("plain", "", false, "")
	const max = 1 << 16
	s3 := &payloadtest.S3{}
	s3.Put("b", "k", "the stored body")
	s3.Put("b", "z", z)
	f.Fuzz(func(t *testing.T, body, enc string, pointer bool, size string) {
		attrs := map[string]types.MessageAttributeValue{}
		if enc != "" {
			attrs[payload.AttrEncoding] = payload.StringAttr(enc)
		}
		if pointer {
			attrs[payload.AttrSize] = types.MessageAttributeValue{StringValue: &size}
		}
		res, err := payload.Decoder{S3: s3, MaxBytes: max}.Decode(context.Background(), body, attrs)
		if err != nil {
			var pe *payload.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *payload.Error", err, err)
			}
			if !pe.Permanent {
				t.Fatalf("hostile input gave a transient error: %v", err)
			}
			return
		}
		if int64(len(res.Body)) > max && (enc != "" || pointer) {
			t.Fatalf("%d bytes returned, over the cap of %d", len(res.Body), max)
		}
		if !pointer && enc == "" && res.Body != body {
			t.Fatal("a plain body was changed")
		}
	})
}

// FuzzCompress: whatever is compressed decompresses to itself.
func FuzzCompress(f *testing.F) {
	f.Add("hello hello hello hello hello hello hello hello")
	f.Add("")
	f.Fuzz(func(t *testing.T, body string) {
		z, ok := payload.Compress(body)
		if !ok {
			return
		}
		got, err := payload.Decompress(z, int64(len(body))+1)
		if err != nil || got != body {
			t.Fatalf("round trip: %v, equal %v", err, got == body)
		}
	})
}
