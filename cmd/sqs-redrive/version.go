package main

import (
	"fmt"
	"runtime/debug"

	"github.com/sqsonce/sqsonce/internal/printable"
)

// version prints the version the binary was built at: the main module's
// version (a tag such as v0.1.0 when installed with go install …@v0.1.0;
// "(devel)" or a pseudo-version when built in a checkout) and, when the
// build recorded them, the VCS revision and whether the tree had
// uncommitted changes.
func (a *app) version(argv []string) error {
	pos, err := parse(a.flags("version"), argv)
	if err != nil {
		return err
	}
	if err := args(pos, 0, "no arguments"); err != nil {
		return err
	}
	read := a.buildInfo
	if read == nil {
		read = debug.ReadBuildInfo
	}
	info, ok := read()
	if !ok || info == nil {
		if a.g.json {
			a.emit(map[string]any{"version": nil})
		} else {
			fmt.Fprintln(a.stdout, "sqs-redrive (unknown version: built without module information)")
		}
		return nil
	}
	var revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if a.g.json {
		o := map[string]any{"version": info.Main.Version, "go": info.GoVersion}
		if revision != "" {
			o["revision"], o["modified"] = revision, modified
		}
		a.emit(o)
		return nil
	}
	line := "sqs-redrive " + printable.Escape(info.Main.Version)
	if revision != "" {
		line += " (" + printable.Escape(revision[:min(len(revision), 12)])
		if modified {
			line += ", modified"
		}
		line += ")"
	}
	fmt.Fprintln(a.stdout, line)
	return nil
}
