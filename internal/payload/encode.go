package payload

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
)

// PutAPI is the S3 call a producer makes to store a body.
type PutAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// DeleteAPI is the S3 call that deletes a stored body.
type DeleteAPI interface {
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// encoder is shared: EncodeAll is safe for concurrent use and starts no
// goroutine with concurrency 1.
var encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))

// Compress returns body as EncodingZstd text (base64 of a zstd frame),
// and whether that is shorter than body: a body that does not shrink is
// best sent as it is.
func Compress(body string) (string, bool) {
	z := encoder.EncodeAll([]byte(body), nil)
	n := base64.StdEncoding.EncodedLen(len(z))
	if n >= len(body) {
		return "", false
	}
	return base64.StdEncoding.EncodeToString(z), true
}

// Decompress undoes Compress, holding at most max bytes (0 means
// DefaultMaxBytes).
func Decompress(text string, max int64) (string, error) {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	s, err := decompress(text, max)
	if err != nil {
		return "", err
	}
	return s, nil
}

// validPrefix is what the Java client allows in a key prefix
// (SQSExtendedClientConstants.INVALID_S3_PREFIX_KEY_CHARACTERS_PATTERN).
var validPrefix = regexp.MustCompile(`^[a-zA-Z0-9./_-]*$`)

// validBucket is S3's rule for general purpose bucket names.
var validBucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// CheckBucket refuses a bucket name S3 refuses.
func CheckBucket(b string) error {
	if !validBucket.MatchString(b) || strings.Contains(b, "..") {
		return fmt.Errorf("%q is not an S3 bucket name (3 to 63 lower-case letters, digits, dots and hyphens)", b)
	}
	return nil
}

// CheckKeyPrefix refuses a key prefix the Java client would refuse: at
// most 988 characters (a key is the prefix and a 36-character UUID, at
// most 1,024), only letters, digits, '.', '/', '_' and '-', not starting
// with '.' or '/', without "..".
func CheckKeyPrefix(p string) error {
	switch {
	case len(p) > 1024-36:
		return fmt.Errorf("the S3 key prefix is %d characters, more than %d", len(p), 1024-36)
	case strings.HasPrefix(p, ".") || strings.HasPrefix(p, "/"):
		return errors.New("the S3 key prefix must not start with '.' or '/'")
	case strings.Contains(p, ".."):
		return errors.New("the S3 key prefix must not contain \"..\"")
	case !validPrefix.MatchString(p):
		return errors.New("the S3 key prefix may hold only letters, digits, '/', '_', '-' and '.'")
	}
	return nil
}

// Store puts body in bucket under prefix + a random UUID (a new object
// each time: a key made from the message's id would let a second body
// sent with the same id replace the first under a message already sent)
// and returns its pointer.
func Store(ctx context.Context, client PutAPI, bucket, prefix, body string) (Pointer, error) {
	p := Pointer{Bucket: bucket, Key: prefix + uuid.NewString()}
	_, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(p.Key),
		Body:          strings.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("text/plain; charset=UTF-8"),
	})
	if err != nil {
		return Pointer{}, fmt.Errorf("payload: store the body in %s: %w", p, err)
	}
	return p, nil
}

// Delete deletes the object p names. A missing object is no error.
func Delete(ctx context.Context, client DeleteAPI, p Pointer) error {
	_, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if err != nil && !objectGone(err) {
		return fmt.Errorf("payload: delete %s: %w", p, err)
	}
	return nil
}

// objectGone reports whether err says the object or its bucket does not
// exist, by type or error code: fetching it again cannot help.
func objectGone(err error) bool {
	var nsk *s3types.NoSuchKey
	var nsb *s3types.NoSuchBucket
	if errors.As(err, &nsk) || errors.As(err, &nsb) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NoSuchBucket", "NotFound":
			return true
		}
	}
	return false
}
