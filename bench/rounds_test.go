package main

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// TestInterleave: the warm-up's figures are dropped, each measured
// round's land in the samples in order, and every run is reported.
func TestInterleave(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	b := &bench{runs: 3, errw: &log}
	var a, z sample
	err := b.interleave("pair", func(round int) ([]float64, error) {
		return []float64{float64(round), float64(10 * round)}, nil
	}, &a, &z)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint([]float64(a), []float64(z)) != "[1 2 3] [10 20 30]" {
		t.Errorf("samples %v %v, want [1 2 3] [10 20 30]", a, z)
	}
	if want := "bench:   pair: run 3 of 3 done\n"; strings.Count(log.String(), "done\n") != 3 || !strings.HasSuffix(log.String(), want) {
		t.Errorf("progress:\n%s", log.String())
	}

	boom := errors.New("boom")
	var rounds int
	err = b.interleave("fails", func(round int) ([]float64, error) {
		rounds++
		return nil, boom
	}, &a)
	if !errors.Is(err, boom) || rounds != 1 {
		t.Errorf("after a failed round: %v after %d rounds, want boom after 1", err, rounds)
	}
	if err := b.interleave("short", func(int) ([]float64, error) { return []float64{1}, nil }, &a, &z); err == nil {
		t.Errorf("a round with too few figures was accepted")
	}
}

// TestInTurn: even rounds run the steps forwards, odd rounds backwards,
// and the first error stops the round.
func TestInTurn(t *testing.T) {
	t.Parallel()
	for round, want := range []string{"abc", "cba", "abc"} {
		var got strings.Builder
		step := func(s string) func() error { return func() error { got.WriteString(s); return nil } }
		if err := inTurn(round, step("a"), step("b"), step("c")); err != nil || got.String() != want {
			t.Errorf("round %d ran %q (%v), want %q", round, got.String(), err, want)
		}
	}
	boom := errors.New("boom")
	var ran []string
	err := inTurn(1, func() error { ran = append(ran, "a"); return nil }, func() error { ran = append(ran, "b"); return boom })
	if !errors.Is(err, boom) || fmt.Sprint(ran) != "[b]" {
		t.Errorf("a failing step: %v after %v, want boom after [b]", err, ran)
	}
}

// TestMeasured: the figure lands in its place; an error names what was
// measured and wraps the cause.
func TestMeasured(t *testing.T) {
	t.Parallel()
	var f float64
	if err := measured(&f, "loop", func() (float64, error) { return 42, nil })(); err != nil || f != 42 {
		t.Errorf("measured: %v, figure %v; want nil, 42", err, f)
	}
	boom := errors.New("boom")
	err := measured(&f, "loop", func() (float64, error) { return 0, boom })()
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "loop: ") {
		t.Errorf("measured: %v, want boom named loop", err)
	}
}

type otherError struct{}

func (otherError) Error() string { return "other" }

// TestWorkers: every index runs once, and when workers fail with errors
// of different types one of them is returned.
func TestWorkers(t *testing.T) {
	t.Parallel()
	var calls [101]atomic.Int32
	rate, err := workers(100, 8, func(i int) error {
		calls[i].Add(1)
		return nil
	})
	if err != nil || rate <= 0 {
		t.Fatalf("workers: %v, rate %v", err, rate)
	}
	for i := 1; i <= 100; i++ {
		if n := calls[i].Load(); n != 1 {
			t.Errorf("index %d ran %d times", i, n)
		}
	}

	start := make(chan struct{})
	go func() { close(start) }()
	_, err = workers(64, 8, func(i int) error {
		<-start
		if i%2 == 0 {
			return errors.New("plain")
		}
		return otherError{}
	})
	if err == nil {
		t.Fatal("workers: no error from failing calls")
	}
}

// TestFastestPollers: each count runs twice, 1, 4, 8 then 8, 4, 1, and
// the count with the fastest run wins, even when its first run was slow
// (a pause); a failed run stops the warm-up with its error.
func TestFastestPollers(t *testing.T) {
	t.Parallel()
	rates := map[int][]float64{1: {10, 11}, 4: {25, 24}, 8: {20, 27}}
	var order []int
	got, err := fastestPollers(func(p int) (float64, error) {
		order = append(order, p)
		r := rates[p][0]
		rates[p] = rates[p][1:]
		return r, nil
	})
	if err != nil || got != 8 {
		t.Fatalf("fastestPollers = %d, %v; want 8: its second run was the fastest", got, err)
	}
	if fmt.Sprint(order) != "[1 4 8 8 4 1]" {
		t.Errorf("runs in the order %v, want [1 4 8 8 4 1]", order)
	}
	boom := errors.New("boom")
	if _, err := fastestPollers(func(p int) (float64, error) {
		if p == 8 {
			return 0, boom
		}
		return 1, nil
	}); !errors.Is(err, boom) {
		t.Errorf("a failed run: err = %v, want boom", err)
	}
}
