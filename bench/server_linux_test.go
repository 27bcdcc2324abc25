//go:build linux

package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

func TestProcCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		ok         bool
	}{
		// utime 150 and stime 25 ticks: 1.75 s.
		{"plain name", "4242 (node) S 1 4242 4242 0 -1 4194560 9000 0 0 0 150 25 0 0 20 0 11 0 100 1000 2000 18446744073709551615", 1750 * time.Millisecond, true},
		{"name with spaces and parentheses", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1 1", 70 * time.Millisecond, true},
		{"no name", "4242 node S 1", 0, false},
		{"cut short", "4242 (node) S 1 4242 4242 0 -1 4194560 9000 0 0 0", 0, false},
		{"not a number", "4242 (node) S 1 4242 4242 0 -1 4194560 9000 0 0 0 x 25 0", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := procCPU(tc.stat)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("procCPU = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestProcCPUSelf reads this process's own /proc/PID/stat, as
// newServerCPU reads fauxqs's: the format is the kernel's, not a sample.
func TestProcCPUSelf(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := procCPU(string(b)); !ok {
		t.Fatalf("procCPU could not read %q", b)
	}
}

// TestServerCPU: against the local stack, newServerCPU finds fauxqs and
// its reading grows while fauxqs serves calls.
func TestServerCPU(t *testing.T) {
	client := testenv.SQS(t)
	if os.Getenv("SQSONCE_STACK_DIR") == "" {
		t.Skip("SQSONCE_STACK_DIR is not set: make test (localstack/with-stack.sh) sets it")
	}
	read, why := newServerCPU()
	if read == nil {
		t.Fatalf("newServerCPU: %s", why)
	}
	before, ok := read()
	if !ok {
		t.Fatal("first reading failed")
	}
	q, _ := testenv.Queue(t, client, "servercpu", testenv.QueueOptions{})
	deadline := time.Now().Add(30 * time.Second)
	for {
		for range 200 {
			if _, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q)}); err != nil {
				t.Fatal(err)
			}
		}
		after, ok := read()
		if !ok {
			t.Fatal("second reading failed")
		}
		if after > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fauxqs's CPU stayed at %v over 30 s of calls", before)
		}
	}
}
