package redrive_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/redrive"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// repeat is an endless stream of one byte.
type repeat byte

func (b repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// A line longer than MaxRecordBytes is rejected with a clear error, after
// reading little more than the limit (not the whole line).
func TestRecordLineTooLong(t *testing.T) {
	t.Parallel()
	const limit = 8 << 20 // redrive.MaxRecordBytes
	huge := io.MultiReader(strings.NewReader("{\"body\":\"ok\"}\n{\"body\":\""), io.LimitReader(repeat('a'), 64<<20), strings.NewReader("\"}\n"))
	cr := &countingReader{r: huge}
	n, err := redrive.CheckRecords(cr, false)
	if !errors.Is(err, redrive.ErrBadRecord) || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "longer than 8 MiB") {
		t.Fatalf("err %v", err)
	}
	if n != 1 {
		t.Fatalf("%d records before the long line, want 1", n)
	}
	if cr.n > limit+1<<20 {
		t.Fatalf("read %d bytes of a %d-byte line: the whole line was read", cr.n, 64<<20)
	}
}
