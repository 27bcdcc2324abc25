package payload

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/klauspost/compress/zstd"
)

// DefaultMaxBytes is the largest body Decode returns unless told
// otherwise.
const DefaultMaxBytes = 64 << 20

// ClassPayload is the failure class of a message whose body could not be
// fetched or decoded for good (deadletter.ClassPayload).
const ClassPayload = "payload"

// GetAPI is the S3 call Decode makes for a pointer message.
type GetAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Error is Decode's error. Permanent ones (a missing object or bucket, a
// pointer or encoding that does not parse, a body over the cap, no S3
// client to fetch with) fail the same way on every delivery; the others
// (throttling, a network error, access refused) may heal.
type Error struct {
	// Pointer is the object the body is in, when there is one.
	Pointer *Pointer
	// Permanent says another delivery fails the same way.
	Permanent bool
	Err       error
}

func (e *Error) Error() string {
	where := "message body"
	if e.Pointer != nil {
		where = "message body in " + e.Pointer.String()
	}
	return fmt.Sprintf("payload: %s: %v", where, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// FailureClass is ClassPayload for a permanent error, so that the
// consumer's classification dead-letters the message with that class; a
// transient error has none, and is retried.
func (e *Error) FailureClass() string {
	if e.Permanent {
		return ClassPayload
	}
	return ""
}

// ErrTooLarge is wrapped by the error of a body over the cap.
var ErrTooLarge = errors.New("body over the size cap")

// Decoder turns a received body back into the body its producer sent.
type Decoder struct {
	// S3 fetches pointer messages' bodies; nil fails them (permanently,
	// saying what to set).
	S3 GetAPI
	// MaxBytes caps the body returned (fetched, decompressed). 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// Hint is appended to the error of a pointer message met without an
	// S3 client (what to set).
	Hint string
}

// Result is what Decode found.
type Result struct {
	// Body is the body as its producer sent it.
	Body string
	// Pointer is the S3 object the body came from; nil when it was in the
	// message.
	Pointer *Pointer
	// Encoding is the encoding that was undone ("" for none).
	Encoding string
}

// Needed reports whether a message with attrs needs Decode: it is a
// pointer or carries an encoding.
func Needed(attrs map[string]types.MessageAttributeValue) bool {
	return IsPointer(attrs) || Encoding(attrs) != ""
}

// Decode returns the body the producer sent: fetched from S3 when the
// message is a pointer, decompressed when it carries an encoding, with at
// most MaxBytes of it held (a larger body fails, permanently, without
// being read further). A message that is neither is returned as it is.
func (d Decoder) Decode(ctx context.Context, body string, attrs map[string]types.MessageAttributeValue) (Result, error) {
	res := Result{Body: body, Encoding: Encoding(attrs)}
	max := d.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	if res.Encoding != "" && res.Encoding != EncodingZstd {
		return res, &Error{Permanent: true, Err: fmt.Errorf("unknown %s %q (this version reads %q)", AttrEncoding, res.Encoding, EncodingZstd)}
	}
	if !IsPointer(attrs) {
		if res.Encoding == "" {
			return res, nil
		}
		out, err := decompress(body, max)
		if err != nil {
			return res, err
		}
		res.Body = out
		return res, nil
	}
	p, err := ParsePointer(body)
	if err != nil {
		return res, &Error{Permanent: true, Err: err}
	}
	res.Pointer = &p
	if d.S3 == nil {
		return res, &Error{Pointer: &p, Permanent: true, Err: fmt.Errorf("the message is an S3 pointer and no S3 client is configured%s", d.Hint)}
	}
	// The size attribute is a hint: a body that says it is over the cap
	// is not fetched at all. (The object's own length is checked too.)
	if n, ok := declaredSize(attrs); ok && n > max && res.Encoding == "" {
		return res, &Error{Pointer: &p, Permanent: true, Err: fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, n, max)}
	}
	out, err := d.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if err != nil {
		return res, &Error{Pointer: &p, Permanent: objectGone(err), Err: fmt.Errorf("get object: %w", err)}
	}
	defer out.Body.Close()
	stored := max
	if res.Encoding != "" {
		// Base64 of a compressed body: its text is at most as large as
		// what SQS would have taken, and the decompressed size is capped
		// below.
		stored = max/3*4 + 4
	}
	if out.ContentLength != nil && *out.ContentLength > stored {
		return res, &Error{Pointer: &p, Permanent: true, Err: fmt.Errorf("%w: the object is %d bytes, more than %d", ErrTooLarge, *out.ContentLength, stored)}
	}
	if res.Encoding != "" {
		text, err := d.readAll(out.Body, out.ContentLength, stored, &p)
		if err != nil {
			return res, err
		}
		s, err := decompress(text, max)
		if err != nil {
			err.Pointer = &p
			return res, err
		}
		res.Body = s
		return res, nil
	}
	s, rerr := d.readAll(out.Body, out.ContentLength, max, &p)
	if rerr != nil {
		return res, rerr
	}
	res.Body = s
	return res, nil
}

// readAll reads r (of length n when known) into one string of at most max
// bytes: a known length is allocated once, so a body costs its own size
// and no more.
func (d Decoder) readAll(r io.Reader, n *int64, max int64, p *Pointer) (string, *Error) {
	var b strings.Builder
	if n != nil && *n >= 0 {
		b.Grow(int(*n))
	}
	got, err := io.Copy(&b, io.LimitReader(r, max+1))
	if err != nil {
		return "", &Error{Pointer: p, Err: fmt.Errorf("read object: %w", err)}
	}
	if got > max {
		return "", &Error{Pointer: p, Permanent: true, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)}
	}
	if n != nil && *n >= 0 && got != *n {
		return "", &Error{Pointer: p, Err: fmt.Errorf("read object: got %d bytes of %d", got, *n)}
	}
	return b.String(), nil
}

// declaredSize is the pointer's size attribute, when it is a number.
func declaredSize(attrs map[string]types.MessageAttributeValue) (int64, bool) {
	v, ok := attrs[AttrSize]
	if !ok {
		v, ok = attrs[AttrLegacySize]
	}
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(aws.ToString(v.StringValue)), 10, 64)
	return n, err == nil && n >= 0
}

// decompress undoes EncodingZstd: base64 text of one zstd frame, read
// from text, into at most limit bytes. The frame's own size, when its
// header gives one within limit, is allocated once.
func decompress(text string, limit int64) (string, *Error) {
	bad := func(err error) *Error {
		return &Error{Permanent: true, Err: fmt.Errorf("the body claims %s %q and does not decode: %w", AttrEncoding, EncodingZstd, err)}
	}
	// The decoder's own bound (on its window) is at least 1 MiB, as a
	// frame's window is never under 1 KiB and small caps would refuse
	// valid frames; the limit itself is kept by the LimitReader.
	zr, err := zstd.NewReader(base64.NewDecoder(base64.StdEncoding, strings.NewReader(text)),
		zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(uint64(max(limit, 1<<20))))
	if err != nil {
		return "", bad(err)
	}
	defer zr.Close()
	var b strings.Builder
	if n := frameSize(text); n > 0 && n <= limit {
		b.Grow(int(n))
	}
	got, err := io.Copy(&b, io.LimitReader(zr, limit+1))
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded), err == nil && got > limit:
		return "", &Error{Permanent: true, Err: fmt.Errorf("%w: decompressed, more than %d bytes", ErrTooLarge, limit)}
	case err != nil:
		return "", bad(err)
	case got == 0:
		return "", bad(errors.New("it holds no data"))
	}
	return b.String(), nil
}

// frameSize is the content size a zstd frame's header declares, from
// the first bytes of its base64 text; 0 when it does not say.
func frameSize(text string) int64 {
	head := text[:min(len(text), 32)] // 24 bytes, past the longest header
	raw, err := base64.StdEncoding.DecodeString(head[:len(head)/4*4])
	if err != nil {
		return 0
	}
	var h zstd.Header
	if h.Decode(raw) != nil || !h.HasFCS {
		return 0
	}
	return int64(min(h.FrameContentSize, 1<<62))
}
