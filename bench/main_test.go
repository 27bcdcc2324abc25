package main

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The offered-load rows start this binary as their producer: under go
	// test that is the test binary.
	if len(os.Args) > 1 && os.Args[1] == "produce" {
		os.Exit(runProduce(context.Background(), os.Args[2:], os.Stderr))
	}
	goleak.VerifyTestMain(m,
		// The SDK client's idle keep-alive connections.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
