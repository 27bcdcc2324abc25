package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// interleave is how a row with a limit is measured: a warm-up round, then
// b.runs rounds, each measuring every side of the comparison once, in
// turn (inTurn: forwards, then backwards), so that drift in the stack
// reaches every side alike. round runs
// one round and returns one figure a side, in the order of into; each
// measured round's figures are appended to those samples (the warm-up's
// are dropped), and its end is reported as "<label>: run i of n done".
func (b *bench) interleave(label string, round func(round int) ([]float64, error), into ...*sample) error {
	for r := range b.runs + 1 {
		figs, err := round(r)
		if err != nil {
			return err
		}
		if len(figs) != len(into) {
			return fmt.Errorf("bench: %s: a round gave %d figures for %d samples", label, len(figs), len(into))
		}
		if r == 0 {
			continue // the warm-up: connections, JITs, the tables' first writes
		}
		for i, f := range figs {
			*into[i] = append(*into[i], f)
		}
		fmt.Fprintf(b.errw, "bench:   %s: run %d of %d done\n", label, r, b.runs)
	}
	return nil
}

// inTurn runs steps in order on even rounds and in reverse on odd ones,
// so that no side of a comparison always runs after another: a stack that
// slows down or warms up as a round goes on reaches each side alike.
func inTurn(round int, steps ...func() error) error {
	for i := range steps {
		if round%2 == 1 {
			i = len(steps) - 1 - i
		}
		if err := steps[i](); err != nil {
			return err
		}
	}
	return nil
}

// measured is a round's step (for inTurn) that stores measure's figure in
// into, its error naming what was measured.
func measured(into *float64, what string, measure func() (float64, error)) func() error {
	return func() (err error) {
		if *into, err = measure(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

// workers calls fn for i in 1..n from the given number of goroutines and
// returns calls per second. An error stops its worker; the first is
// returned once all have stopped.
func workers(n, concurrency int, fn func(i int) error) (float64, error) {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
