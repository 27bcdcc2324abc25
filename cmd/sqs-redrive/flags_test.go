package main

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		pos  []string
		to   string
		dry  bool
		max  int
		f    []string
	}{
		{[]string{"DLQ", "--to", "X", "--dry-run"}, []string{"DLQ"}, "X", true, 0, nil},
		{[]string{"--to", "X", "--dry-run", "DLQ"}, []string{"DLQ"}, "X", true, 0, nil},
		{[]string{"--to=X", "DLQ", "-max", "3", "--class", "a", "--filter", "error~x y"}, []string{"DLQ"}, "X", false, 3, []string{"class=a", "error~x y"}},
		{[]string{"DLQ", "--", "--to"}, []string{"DLQ", "--to"}, "", false, 0, nil},
		{[]string{"-", "--dry-run=false"}, []string{"-"}, "", false, 0, nil},
	}
	for _, c := range cases {
		a := &app{}
		fs := a.flags("move")
		to := fs.String("to", "", "")
		dry := fs.Bool("dry-run", false, "")
		maxN := fs.Int("max", 0, "")
		var exprs list
		filterFlags(fs, &exprs)
		pos, err := parse(fs, c.args)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !slices.Equal(pos, c.pos) || *to != c.to || *dry != c.dry || *maxN != c.max || !slices.Equal(exprs, list(c.f)) {
			t.Errorf("%v: pos %v to %q dry %v max %d filters %v", c.args, pos, *to, *dry, *maxN, exprs)
		}
	}
	a := &app{}
	fs := a.flags("move")
	if _, err := parse(fs, []string{"--nope", "DLQ"}); !errors.Is(err, errUsage) {
		t.Fatalf("unknown flag: %v", err)
	}
	if _, err := parse(a.flags("x"), []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}

func TestConfirmNeedsYesWithoutTerminal(t *testing.T) {
	t.Parallel()
	a := &app{stdin: strings.NewReader("y\n")}
	if err := a.confirm("go?", false); !errors.Is(err, errUsage) {
		t.Fatalf("got %v", err)
	}
	if err := a.confirm("go?", true); err != nil {
		t.Fatal(err)
	}
}
