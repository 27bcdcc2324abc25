package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// errUsage marks an error of the command line (exit code 2).
var errUsage = errors.New("usage")

// usageError wraps a message as a usage error.
func usageError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

// prefixed is a repeatable flag that records "prefix" + value into a list.
type prefixed struct {
	to     *list
	prefix string
}

func (p prefixed) String() string     { return "" }
func (p prefixed) Set(s string) error { *p.to = append(*p.to, p.prefix+s); return nil }

// parse parses flags that may come before, between or after the positional
// arguments (`move DLQ --to X` and `move --to X DLQ` alike); "--" ends the
// flags. It returns the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError("%v", err)
	}
	return append(fs.Args(), pos...), nil
}
