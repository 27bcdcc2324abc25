package redrive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/redrive"
)

// records writes export lines, each with a small body and the given
// attributes.
func records(t *testing.T, n int, attrs func(i int) map[string]redrive.Attribute) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	for i := range n {
		b, err := json.Marshal(redrive.Record{MessageID: fmt.Sprint(i), Body: fmt.Sprintf("b%d", i), Attributes: attrs(i)})
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	return &buf
}

// SQS counts every message attribute's name, data type and value against
// the batch's 1 MiB payload (as against a message's size): an import must
// batch by that size, not by the body alone, or ten records with a 200 KB
// attribute each make one batch of 2 MB that SQS refuses every time.
func TestImportCountsAttributeBytes(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	url := f.AddQueue("restored", nil)
	big := strings.Repeat("x", 200_000)
	file := records(t, 10, func(int) map[string]redrive.Attribute {
		return map[string]redrive.Attribute{"payload": {DataType: "String", StringValue: &big}}
	})
	n, err := redrive.CheckRecords(bytes.NewReader(file.Bytes()), false)
	if err != nil || n != 10 {
		t.Fatalf("check: %d, %v", n, err)
	}
	r, _ := redrive.New(redrive.Config{Client: f})
	q, err := r.Queue(context.Background(), "restored")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Import(context.Background(), file, q, redrive.ImportOptions{})
	if err != nil || sum.Moved != 10 || sum.Failed != 0 {
		t.Fatalf("import: moved=%d failed=%d notes=%q: %v", sum.Moved, sum.Failed, sum.Notes, err)
	}
	if got := len(f.Messages(url)); got != 10 {
		t.Fatalf("queue holds %d messages, want 10", got)
	}
	if p := f.Problems(); len(p) > 0 {
		t.Fatalf("SQS contract violations: %v", p)
	}
}

// A record that SQS can never take (over 1 MiB with its attributes, or
// more than 10 attributes) is a bad record for CheckRecords, found before
// anything is sent, not a send that fails forever.
func TestCheckRecordsRefusesWhatSQSCannotTake(t *testing.T) {
	t.Parallel()
	half := strings.Repeat("y", 600_000)
	for _, c := range []struct {
		name  string
		attrs func(i int) map[string]redrive.Attribute
		want  string
	}{
		{"over 1 MiB with its attributes", func(i int) map[string]redrive.Attribute {
			if i == 0 {
				return nil
			}
			return map[string]redrive.Attribute{"a": {DataType: "String", StringValue: &half}, "b": {DataType: "Binary", BinaryValue: []byte(half)}}
		}, "line 2: 1200016 bytes"},
		{"eleven attributes", func(i int) map[string]redrive.Attribute {
			if i == 0 {
				return nil
			}
			m := map[string]redrive.Attribute{}
			for j := range 11 {
				v := "v"
				m[fmt.Sprintf("a%d", j)] = redrive.Attribute{DataType: "String", StringValue: &v}
			}
			return m
		}, "line 2: 11 message attributes"},
	} {
		file := records(t, 2, c.attrs)
		n, err := redrive.CheckRecords(file, false)
		if !errors.Is(err, redrive.ErrBadRecord) || !strings.Contains(err.Error(), c.want) || n != 1 {
			t.Errorf("%s: CheckRecords = %d, %v; want 1 and an error wrapping ErrBadRecord with %q", c.name, n, err, c.want)
		}
	}
}
