//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestIsolateDynamoDB: DynamoDB Local's threads get one CPU, this process's
// and fauxqs's the others, and undo gives every thread its mask back.
func TestIsolateDynamoDB(t *testing.T) {
	testenv.Dynamo(t)
	dir := os.Getenv("SQSONCE_STACK_DIR")
	if dir == "" {
		t.Skip("SQSONCE_STACK_DIR is not set: make test (localstack/with-stack.sh) sets it")
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 {
		t.Skip("fewer than 2 CPUs")
	}
	ddb, err := stackPID(dir, "dynamodb", "DynamoDBLocal.jar")
	if err != nil {
		t.Fatal(err)
	}
	sqs, err := stackPID(dir, "fauxqs", "fauxqs")
	if err != nil {
		t.Fatal(err)
	}
	before := map[int]unix.CPUSet{}
	for _, p := range []int{ddb, sqs, os.Getpid()} {
		for tid, m := range masks(t, p) {
			before[tid] = m
		}
	}
	undo, why := isolateDynamoDB()
	if undo == nil {
		t.Fatalf("not isolated: %s", why)
	}
	for tid, m := range masks(t, ddb) {
		if m.Count() != 1 {
			t.Errorf("DynamoDB Local thread %d may run on %d CPUs, want 1", tid, m.Count())
		}
	}
	for _, p := range []int{sqs, os.Getpid()} {
		for tid, m := range masks(t, p) {
			if m.Count() != all.Count()-1 {
				t.Errorf("PID %d thread %d may run on %d CPUs, want %d", p, tid, m.Count(), all.Count()-1)
			}
		}
	}
	undo()
	for _, p := range []int{ddb, sqs, os.Getpid()} {
		for tid, m := range masks(t, p) {
			if was, ok := before[tid]; ok && m != was {
				t.Errorf("PID %d thread %d: mask not given back", p, tid)
			}
		}
	}
}

// TestStackPIDChecksTheProcess: a PID file naming another program is refused,
// so the bench never pins a process that reused the PID.
func TestStackPIDChecksTheProcess(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dynamodb.pid"), []byte(strconv.Itoa(os.Getpid())+" 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := stackPID(dir, "dynamodb", "DynamoDBLocal.jar"); err == nil {
		t.Fatal("a PID file naming the test binary was accepted as DynamoDB Local")
	}
	if _, err := stackPID(t.TempDir(), "dynamodb", "DynamoDBLocal.jar"); err == nil {
		t.Fatal("a missing PID file was accepted")
	}
}

// masks reads the CPU mask of every thread of pid.
func masks(t *testing.T, pid int) map[int]unix.CPUSet {
	t.Helper()
	tids, err := threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]unix.CPUSet{}
	for _, tid := range tids {
		var m unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &m); err != nil {
			continue // the thread ended
		}
		out[tid] = m
	}
	return out
}
