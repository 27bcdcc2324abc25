package payloadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The functions below port the rules of AWS's extended client libraries
// (amazon-sqs-java-extended-client-lib 2.1.2 with payloadoffloading-common
// 2.2.0, amazon-sqs-python-extended-client-lib 1.0.1), written in Go from
// their source; see the comments of
// internal/payload/testdata/extended-clients.jsonc for the files. They are
// what those libraries would do with a message, so a test can tell that
// sqsonce's messages are read by them, and that their messages are what
// the fixtures say.

// The libraries' constants.
const (
	javaClass       = "software.amazon.payloadoffloading.PayloadS3Pointer"
	javaLegacyClass = "com.amazon.sqs.javamessaging.MessageS3Pointer"
	reservedName    = "ExtendedPayloadSize"
	legacyName      = "SQSLargePayloadSize"
	bucketMarker    = "-..s3BucketName..-"
	keyMarker       = "-..s3Key..-"
	maxAttributes   = 10 - 1
)

// Received is a message as a library's receiveMessage hands it to its
// user.
type Received struct {
	Body          string
	Attributes    map[string]types.MessageAttributeValue
	ReceiptHandle string
	// Bucket and Key are the object the library read.
	Bucket, Key string
}

// GetAPI is the S3 read the libraries make.
type GetAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// JavaReceive is AmazonSQSExtendedClient.receiveMessage (2.1.2) for one
// message: a pointer when either reserved attribute is present
// (getReservedAttributeNameIfPresent); the body's legacy class name
// replaced; the pointer read as Jackson reads it with default typing
// (PayloadS3Pointer.fromJson); the object read as UTF-8 text
// (S3Dao.getTextFromS3); the reserved attributes removed; the pointer
// embedded in the receipt handle (embedS3PointerInReceiptHandle).
func JavaReceive(ctx context.Context, s3c GetAPI, body string, attrs map[string]types.MessageAttributeValue, receiptHandle string) (Received, error) {
	out := Received{Body: body, Attributes: attrs, ReceiptHandle: receiptHandle}
	_, hasNew := attrs[reservedName]
	_, hasOld := attrs[legacyName]
	if !hasNew && !hasOld {
		return out, nil
	}
	pointer := strings.ReplaceAll(body, javaLegacyClass, javaClass)
	bucket, key, err := jacksonPointer(pointer)
	if err != nil {
		return out, fmt.Errorf("java: failed to read the S3 object pointer from given string: %w", err)
	}
	text, err := getText(ctx, s3c, bucket, key)
	if err != nil {
		return out, fmt.Errorf("java: %w", err)
	}
	out.Body = text
	out.Attributes = maps.Clone(attrs)
	delete(out.Attributes, reservedName)
	delete(out.Attributes, legacyName)
	out.ReceiptHandle = bucketMarker + bucket + bucketMarker + keyMarker + key + keyMarker + receiptHandle
	out.Bucket, out.Key = bucket, key
	return out, nil
}

// jacksonPointer reads the pointer as Jackson's ObjectMapper with
// enableDefaultTyping(NON_FINAL) reads a PayloadS3Pointer: a JSON array
// (WRAPPER_ARRAY) of exactly the type id and the value; the type id must
// name PayloadS3Pointer; unknown properties are ignored
// (FAIL_ON_UNKNOWN_PROPERTIES false); a missing property stays null.
func jacksonPointer(s string) (bucket, key string, err error) {
	var arr []json.RawMessage
	if err := json.Unmarshal([]byte(s), &arr); err != nil {
		return "", "", fmt.Errorf("need JSON Array to contain As.WRAPPER_ARRAY type information: %w", err)
	}
	if len(arr) != 2 {
		return "", "", errors.New("expected closing END_ARRAY after type information and deserialized value")
	}
	var id string
	if err := json.Unmarshal(arr[0], &id); err != nil {
		return "", "", errors.New("need JSON String that contains type id")
	}
	if id != javaClass {
		return "", "", fmt.Errorf("could not resolve type id %q as a subtype of PayloadS3Pointer", id)
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(arr[1], &v); err != nil {
		return "", "", err
	}
	var b, k *string
	if raw, ok := v["s3BucketName"]; ok {
		if err := json.Unmarshal(raw, &b); err != nil {
			return "", "", err
		}
	}
	if raw, ok := v["s3Key"]; ok {
		if err := json.Unmarshal(raw, &k); err != nil {
			return "", "", err
		}
	}
	if b == nil || k == nil { // GetObjectRequest refuses a null bucket or key
		return "", "", errors.New("null s3BucketName or s3Key")
	}
	return *b, *k, nil
}

// PythonReceive is the Python client's _receive_message_decorator (1.0.1)
// for one message: a pointer when either attribute is present; the
// receipt handle modified from the body (_embed_s3_pointer_in_receipt_handle,
// json.loads, a list of 2 whose second element is a dict); the body
// fetched (_retrieve_message_from_s3, .decode() as UTF-8); one reserved
// attribute popped (ExtendedPayloadSize, else SQSLargePayloadSize).
func PythonReceive(ctx context.Context, s3c GetAPI, body string, attrs map[string]types.MessageAttributeValue, receiptHandle string) (Received, error) {
	out := Received{Body: body, Attributes: attrs, ReceiptHandle: receiptHandle}
	_, hasNew := attrs[reservedName]
	_, hasOld := attrs[legacyName]
	if !hasNew && !hasOld {
		return out, nil
	}
	var arr []any
	if err := json.Unmarshal([]byte(body), &arr); err != nil {
		return out, fmt.Errorf("python: json.loads: %w", err)
	}
	if len(arr) != 2 {
		return out, errors.New("python: Invalid Message Format: the stored S3 message")
	}
	d, ok := arr[1].(map[string]any)
	if !ok {
		return out, errors.New("python: Invalid Message Format: the stored S3 message")
	}
	bucket, ok1 := d["s3BucketName"].(string)
	key, ok2 := d["s3Key"].(string)
	if !ok1 || !ok2 {
		return out, errors.New("python: KeyError: s3BucketName or s3Key")
	}
	out.ReceiptHandle = bucketMarker + bucket + bucketMarker + keyMarker + key + keyMarker + receiptHandle
	text, err := getText(ctx, s3c, bucket, key)
	if err != nil {
		return out, fmt.Errorf("python: %w", err)
	}
	out.Body = text
	out.Attributes = maps.Clone(attrs)
	if _, ok := out.Attributes[reservedName]; ok {
		delete(out.Attributes, reservedName)
	} else {
		delete(out.Attributes, legacyName)
	}
	out.Bucket, out.Key = bucket, key
	return out, nil
}

func getText(ctx context.Context, s3c GetAPI, bucket, key string) (string, error) {
	obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", fmt.Errorf("failed to get the S3 object which contains the payload: %w", err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errors.New("the S3 object is not UTF-8 text")
	}
	return string(b), nil
}

// JavaOriginalReceiptHandle is AmazonSQSExtendedClientUtil.getOrigReceiptHandle:
// what follows the second key marker (used by deleteMessage and
// changeMessageVisibility when isS3ReceiptHandle).
func JavaOriginalReceiptHandle(h string) string {
	if !strings.Contains(h, bucketMarker) || !strings.Contains(h, keyMarker) {
		return h
	}
	first := strings.Index(h, keyMarker)
	second := strings.Index(h[first+1:], keyMarker) + first + 1
	return h[second+len(keyMarker):]
}

// PythonOriginalReceiptHandle is _get_original_receipt_handle:
// modified_receipt_handle.split('-')[-1].
func PythonOriginalReceiptHandle(h string) string {
	if !strings.Contains(h, bucketMarker) || !strings.Contains(h, keyMarker) {
		return h
	}
	parts := strings.Split(h, "-")
	return parts[len(parts)-1]
}

// JavaSend is AmazonSQSExtendedClient.storeMessageInS3 (2.1.2), after
// checkMessageAttributes and isLarge decided to store the body: the
// size attribute (SQSLargePayloadSize unless legacy is false), the body
// stored under key, the body replaced by PayloadS3Pointer.toJson.
func JavaSend(body string, attrs map[string]types.MessageAttributeValue, bucket, key string, legacy bool) (string, map[string]types.MessageAttributeValue, error) {
	if err := checkAttributes(attrs); err != nil {
		return "", nil, fmt.Errorf("java: %w", err)
	}
	out := maps.Clone(attrs)
	if out == nil {
		out = map[string]types.MessageAttributeValue{}
	}
	name := reservedName
	if legacy {
		name = legacyName
	}
	out[name] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(len(body)))}
	// Jackson: compact, the fields in declaration order, strings escaped
	// with \" and \\ and control characters only.
	return `["` + javaClass + `",{"s3BucketName":` + jacksonString(bucket) + `,"s3Key":` + jacksonString(key) + `}]`, out, nil
}

// PythonSend is _store_message_in_s3 (1.0.1) once the body is to be
// stored: json.dumps of the pointer with Python's default separators, the
// attribute ExtendedPayloadSize (or the legacy name and class).
func PythonSend(body string, attrs map[string]types.MessageAttributeValue, bucket, key string, legacy bool) (string, map[string]types.MessageAttributeValue, error) {
	if err := checkAttributes(attrs); err != nil {
		return "", nil, fmt.Errorf("python: %w", err)
	}
	out := maps.Clone(attrs)
	if out == nil {
		out = map[string]types.MessageAttributeValue{}
	}
	class, name := javaClass, reservedName
	if legacy {
		class, name = javaLegacyClass, legacyName
	}
	out[name] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(len(body)))}
	if v, ok := attrs["S3Key"]; ok {
		key = aws.ToString(v.StringValue)
	}
	return `["` + class + `", {"s3BucketName": ` + jacksonString(bucket) + `, "s3Key": ` + jacksonString(key) + `}]`, out, nil
}

// checkAttributes is checkMessageAttributes / _check_message_attributes:
// at most 9 attributes of the user's, none of them reserved.
func checkAttributes(attrs map[string]types.MessageAttributeValue) error {
	if len(attrs) > maxAttributes {
		return fmt.Errorf("number of message attributes [%d] exceeds the maximum allowed for large-payload messages [%d]", len(attrs), maxAttributes)
	}
	for _, n := range []string{reservedName, legacyName} {
		if _, ok := attrs[n]; ok {
			return fmt.Errorf("message attribute name %s is reserved for use by SQS extended client", n)
		}
	}
	return nil
}

// jacksonString quotes s for the names the fixtures use (no character
// that Jackson and Python's json.dumps would escape differently).
func jacksonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
