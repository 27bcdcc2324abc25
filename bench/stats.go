package main

import (
	"fmt"
	"slices"
)

// sample is one figure measured in several runs. The table reports its
// median and its spread (min–max), never the best run.
type sample []float64

// one is a sample of a single measurement.
func one(v float64) sample { return sample{v} }

func (s sample) med() float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func (s sample) lo() float64 {
	if len(s) == 0 {
		return 0
	}
	return slices.Min(s)
}

func (s sample) hi() float64 {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

// ratios divides a by b run by run: the i-th sqsonce run by the plain run
// interleaved with it.
func ratios(a, b sample) sample {
	out := make(sample, 0, min(len(a), len(b)))
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// String prints the median and, when the runs differ at the printed
// precision, the spread.
func (s sample) String() string {
	switch {
	case len(s) == 0:
		return "-"
	case num(s.lo()) == num(s.hi()):
		return num(s.med())
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.med()), num(s.lo()), num(s.hi()))
}

// ratioString is String with two decimals throughout.
func (s sample) ratioString() string {
	switch {
	case len(s) == 0:
		return "-"
	case fmt.Sprintf("%.2f", s.lo()) == fmt.Sprintf("%.2f", s.hi()):
		return fmt.Sprintf("%.2f", s.med())
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", s.med(), s.lo(), s.hi())
}

// num prints a figure with sensible precision ("-" for none).
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 10000 || v <= -10000:
		return thousands(int64(v + 0.5))
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1 || v <= -1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// thousands prints n with comma separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
