package main

import (
	"context"
	"errors"
	"io"
)

func cmdWork(ctx context.Context, g *global, args []string, stdout, stderr io.Writer) error {
	return errors.New("work: not built yet")
}
