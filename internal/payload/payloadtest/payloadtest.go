// Package payloadtest holds what tests of the S3 claim check share: an
// in-memory S3, the golden fixtures of AWS's extended client libraries,
// and ports of those libraries' rules for reading and writing a pointer
// message, written from their source (cited in
// internal/payload/testdata/extended-clients.jsonc), so that a test can
// check that a message sqsonce wrote is one they read.
package payloadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// S3 is an in-memory S3 of the three calls sqsonce makes. The zero value
// is empty and ready; it is safe for concurrent use.
type S3 struct {
	mu      sync.Mutex
	objects map[string]string // bucket + "/" + key → body
	// GetErr, when set, is returned by GetObject instead of the object.
	GetErr error
	// Gets, Puts and Deletes count the calls made.
	Gets, Puts, Deletes int
}

// Put stores an object, as a library outside sqsonce would.
func (s *S3) Put(bucket, key, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects == nil {
		s.objects = map[string]string{}
	}
	s.objects[bucket+"/"+key] = body
}

// Object returns an object's body.
func (s *S3) Object(bucket, key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[bucket+"/"+key]
	return b, ok
}

// Len is how many objects are stored.
func (s *S3) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

// PutObject stores the object.
func (s *S3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	s.Put(aws.ToString(in.Bucket), aws.ToString(in.Key), string(b))
	s.mu.Lock()
	s.Puts++
	s.mu.Unlock()
	return &s3.PutObjectOutput{}, nil
}

// GetObject returns the object, or NoSuchKey.
func (s *S3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	s.mu.Lock()
	s.Gets++
	getErr := s.GetErr
	s.mu.Unlock()
	if getErr != nil {
		return nil, getErr
	}
	b, ok := s.Object(aws.ToString(in.Bucket), aws.ToString(in.Key))
	if !ok {
		return nil, &s3types.NoSuchKey{Message: aws.String("The specified key does not exist.")}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(b)), ContentLength: aws.Int64(int64(len(b)))}, nil
}

// DeleteObject deletes the object (S3 answers the same for a missing one).
func (s *S3) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Deletes++
	delete(s.objects, aws.ToString(in.Bucket)+"/"+aws.ToString(in.Key))
	return &s3.DeleteObjectOutput{}, nil
}

// Throttled is the error S3 answers when it slows a caller down.
var Throttled error = &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."}

// Fixture is one message as an extended client library puts it on the
// queue, and the object it points at.
type Fixture struct {
	Name       string                                `json:"name"`
	Body       string                                `json:"body"`
	Attributes map[string]FixtureAttr                `json:"attributes"`
	Object     struct{ Bucket, Key, Content string } `json:"object"`
}

// FixtureAttr is a message attribute of a fixture.
type FixtureAttr struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue"`
}

// SQSAttributes are the fixture's attributes as the SDK types them.
func (f Fixture) SQSAttributes() map[string]types.MessageAttributeValue {
	out := map[string]types.MessageAttributeValue{}
	for k, v := range f.Attributes {
		out[k] = types.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: aws.String(v.StringValue)}
	}
	return out
}

// Fixtures reads internal/payload/testdata/extended-clients.jsonc (lines
// starting with // are comments).
func Fixtures() ([]Fixture, error) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "testdata", "extended-clients.jsonc")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "//") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	var fx []Fixture
	if err := json.Unmarshal(b.Bytes(), &fx); err != nil {
		return nil, fmt.Errorf("payloadtest: %s: %w", path, err)
	}
	return fx, nil
}

// SetGetErr sets GetErr under the lock (for a test that changes it while
// a consumer runs).
func (s *S3) SetGetErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.GetErr = err
}

// GetCalls is Gets, read under the lock.
func (s *S3) GetCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Gets
}
