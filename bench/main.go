// Command bench measures sqsonce against the limits of the servers it runs
// on, in the same run: every figure is printed next to its limit and as a
// ratio. A row with a limit runs both sides -runs times (5), interleaved
// after a warm-up (the no-op drain rows 2×runs − 1 times, see
// drainRounds), and reports the median with its spread. Endpoints come
// from the standard AWS SDK variables (`make bench` starts the local stack
// and sets them).
//
//	bench [-n N] [-runs R] [-only rows] [-md FILE] [-svg FILE]   print (and write) the table
//	bench drain -queue-url URL -n N [-concurrency C] [-handler-delay D]
//	bench produce -queue-url URL -n N -rate R   send N messages at R/s (the offered-load rows' producer)
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "drain" {
		return runDrain(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "produce" {
		return runProduce(ctx, args[1:], stderr)
	}
	if err := runTable(ctx, args, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}
