//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// isolateDynamoDB gives DynamoDB Local a CPU of its own and leaves the
// others to this process and fauxqs, for the rows that call DynamoDB;
// undo puts every mask back. It needs the local stack's PID files (in
// SQSONCE_STACK_DIR, default .stack) and at least 2 CPUs; without them it
// returns why not, and the rows run as they are.
//
// Why: DynamoDB Local commits about one transaction at a time, each on a
// CPU that the client, fauxqs and the JVM's other threads share on a small
// machine. A steady load (a consumer's 32 handlers) then runs the client
// beside that commit and slows it, where a bursty plain loop leaves gaps;
// DynamoDB itself never shares its CPU with the client.
//
// An interrupted bench undoes it on its way out; one killed outright leaves
// the masks until the stack is restarted (make stack-down stack-up).
func isolateDynamoDB() (undo func(), why string) {
	dir := stackDir()
	ddb, err := stackPID(dir, "dynamodb", "DynamoDBLocal.jar")
	if err != nil {
		return nil, err.Error()
	}
	sqs, err := stackPID(dir, "fauxqs", "fauxqs")
	if err != nil {
		return nil, err.Error()
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 {
		return nil, "fewer than 2 CPUs"
	}
	last := -1
	for c := range 1024 { // a CPUSet holds 1024 CPUs
		if all.IsSet(c) {
			last = c
		}
	}
	var alone unix.CPUSet
	alone.Set(last)
	rest := all
	rest.Clear(last)
	pids := []int{os.Getpid(), ddb, sqs}
	saved := make([]unix.CPUSet, len(pids))
	for i, p := range pids {
		if err := unix.SchedGetaffinity(p, &saved[i]); err != nil {
			return nil, fmt.Sprintf("reading PID %d's CPUs: %v", p, err)
		}
	}
	undo = func() {
		for i, p := range pids {
			pinAll(p, &saved[i])
		}
	}
	for _, p := range pids {
		mask := &rest
		if p == ddb {
			mask = &alone
		}
		if err := pinAll(p, mask); err != nil {
			undo()
			return nil, fmt.Sprintf("setting PID %d's CPUs: %v", p, err)
		}
	}
	return undo, ""
}

// pinAll sets the CPU mask of every thread of pid. Threads started later
// inherit it from the thread that starts them.
func pinAll(pid int, mask *unix.CPUSet) error {
	tids, err := threads(pid)
	if err != nil {
		return err
	}
	var first error
	for _, tid := range tids {
		if err := unix.SchedSetaffinity(tid, mask); err != nil && first == nil && err != unix.ESRCH {
			first = err
		}
	}
	return first
}

// threads lists the thread ids of pid.
func threads(pid int) ([]int, error) {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(tasks))
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// stackDir is where localstack/stack.sh keeps its PID files:
// SQSONCE_STACK_DIR, default .stack.
func stackDir() string { return cmpOr(os.Getenv("SQSONCE_STACK_DIR"), ".stack") }

// stackPID reads the PID that localstack/stack.sh wrote for name and checks
// that the process runs a command line holding want.
func stackPID(dir, name, want string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("no %s PID file from the local stack", name)
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, fmt.Errorf("an empty %s PID file", name)
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, fmt.Errorf("a bad %s PID file", name)
	}
	cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !strings.Contains(string(cmd), want) {
		return 0, fmt.Errorf("PID %d is not the local stack's %s", pid, name)
	}
	return pid, nil
}
