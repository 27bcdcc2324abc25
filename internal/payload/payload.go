// Package payload is the one place that knows how a message body travels
// when it is not sent as it is: stored in S3 behind a pointer (the "claim
// check" of AWS's extended client libraries, in their wire format) or
// compressed with zstd. The producer encodes with it; the consumer, the
// Lambda adapter and sqs-redrive decode with it, before any handler runs.
// See docs/large-messages.md.
//
// The pointer format follows AWS's libraries, read from their source
// (the fixtures in testdata name the files and versions):
//
//   - the body is the JSON array
//     ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"B","s3Key":"K"}]
//     (Jackson's default typing of the Java class PayloadS3Pointer, which
//     the Java reader requires);
//   - a message attribute ExtendedPayloadSize (Number: the stored body's
//     size in UTF-8 bytes) marks the message as a pointer; readers also
//     accept the legacy name SQSLargePayloadSize, which the Java client
//     still writes by default;
//   - the S3 object holds the body's text, UTF-8.
//
// A compressed body is base64 (standard, padded) of one zstd frame, marked
// by the attribute sqsonce-encoding = "zstd". Both can apply: a body that
// is still too large once compressed is stored in S3 compressed, and the
// message carries both attributes.
package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Attribute names and values of the wire format.
const (
	// AttrSize marks a pointer message and carries the stored body's size
	// in bytes (DataType Number). AWS's Java and Python extended clients
	// write and read it (SQSExtendedClientConstants.RESERVED_ATTRIBUTE_NAME).
	AttrSize = "ExtendedPayloadSize"
	// AttrLegacySize is the older name of AttrSize, still written by the
	// Java client unless told otherwise, and read by both.
	AttrLegacySize = "SQSLargePayloadSize"
	// AttrEncoding names how the body (or the stored object) is encoded;
	// absent means plain text. sqsonce's own.
	AttrEncoding = "sqsonce-encoding"
	// EncodingZstd is AttrEncoding's value for base64 of a zstd frame.
	EncodingZstd = "zstd"
	// PointerClass is the Java class name the pointer's JSON is typed
	// with.
	PointerClass = "software.amazon.payloadoffloading.PayloadS3Pointer"
)

// legacyClasses are class names older writers typed the pointer with:
// version 1 of the Java client (its reader rewrites names matching
// com.(amazon|amazonaws).(sqs|services).(javamessaging|extendedmessaging).MessageS3Pointer)
// and the Python client's use_legacy_attribute mode.
var legacyClasses = []string{
	"com.amazon.sqs.javamessaging.MessageS3Pointer",
	"com.amazonaws.sqs.javamessaging.MessageS3Pointer",
	"com.amazon.services.javamessaging.MessageS3Pointer",
	"com.amazonaws.services.javamessaging.MessageS3Pointer",
	"com.amazon.sqs.extendedmessaging.MessageS3Pointer",
	"com.amazonaws.sqs.extendedmessaging.MessageS3Pointer",
	"com.amazon.services.extendedmessaging.MessageS3Pointer",
	"com.amazonaws.services.extendedmessaging.MessageS3Pointer",
}

// Reserved reports whether name is an attribute this package writes:
// a producer's own attributes may not use it.
func Reserved(name string) bool {
	return name == AttrSize || name == AttrLegacySize || name == AttrEncoding
}

// Pointer names the S3 object that holds a message's body.
type Pointer struct {
	Bucket, Key string
}

// String is the object's s3:// URL.
func (p Pointer) String() string { return "s3://" + p.Bucket + "/" + p.Key }

// Body is the message body that points at p, exactly as the Java library
// writes it (compact JSON, the bucket first).
func (p Pointer) Body() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // Jackson does not escape <, > or &
	_ = enc.Encode([]any{PointerClass, pointerJSON(p)})
	return strings.TrimSuffix(b.String(), "\n")
}

type pointerJSON struct {
	Bucket string `json:"s3BucketName"`
	Key    string `json:"s3Key"`
}

// IsPointer reports whether attrs mark the message as an S3 pointer: one
// of the size attributes is present, whatever its value (as both AWS
// clients decide).
func IsPointer(attrs map[string]types.MessageAttributeValue) bool {
	_, ok := attrs[AttrSize]
	if !ok {
		_, ok = attrs[AttrLegacySize]
	}
	return ok
}

// ErrNotPointer is wrapped by ParsePointer's error.
var ErrNotPointer = errors.New("not an S3 pointer")

// ParsePointer reads a pointer body: a JSON array of the pointer's class
// name (the current one or a legacy one) and an object with s3BucketName
// and s3Key, other fields ignored.
func ParsePointer(body string) (Pointer, error) {
	var arr []json.RawMessage
	if err := json.Unmarshal([]byte(body), &arr); err != nil {
		return Pointer{}, fmt.Errorf("%w: the body is not a JSON array: %v", ErrNotPointer, err)
	}
	if len(arr) != 2 {
		return Pointer{}, fmt.Errorf("%w: the body is a JSON array of %d elements, not 2", ErrNotPointer, len(arr))
	}
	var class string
	if err := json.Unmarshal(arr[0], &class); err != nil {
		return Pointer{}, fmt.Errorf("%w: its first element is not a class name", ErrNotPointer)
	}
	if class != PointerClass && !isLegacyClass(class) {
		return Pointer{}, fmt.Errorf("%w: unknown pointer class %q", ErrNotPointer, class)
	}
	var pj struct {
		Bucket *string `json:"s3BucketName"`
		Key    *string `json:"s3Key"`
	}
	if err := json.Unmarshal(arr[1], &pj); err != nil {
		return Pointer{}, fmt.Errorf("%w: its second element is not an object of s3BucketName and s3Key: %v", ErrNotPointer, err)
	}
	if pj.Bucket == nil || *pj.Bucket == "" || pj.Key == nil || *pj.Key == "" {
		return Pointer{}, fmt.Errorf("%w: s3BucketName or s3Key is missing or empty", ErrNotPointer)
	}
	return Pointer{Bucket: *pj.Bucket, Key: *pj.Key}, nil
}

func isLegacyClass(c string) bool {
	for _, l := range legacyClasses {
		if c == l {
			return true
		}
	}
	return false
}

// Encoding returns the message's sqsonce-encoding ("" for plain text).
func Encoding(attrs map[string]types.MessageAttributeValue) string {
	v, ok := attrs[AttrEncoding]
	if !ok {
		return ""
	}
	return aws.ToString(v.StringValue)
}

// StringAttr is a String message attribute.
func StringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// NumberAttr is a Number message attribute.
func NumberAttr(n int64) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(fmt.Sprint(n))}
}
