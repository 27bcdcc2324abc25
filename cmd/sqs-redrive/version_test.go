package main

import (
	"bytes"
	"context"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// sqs-redrive version prints the module version and, when the build
// recorded them, the VCS revision and whether the tree was modified.
func TestVersion(t *testing.T) {
	t.Parallel()
	// The test binary's own build info.
	code, out, errOut := cli(t, "version")
	if code != 0 || !regexp.MustCompile(`^sqs-redrive \S+( \([0-9a-f]{1,12}(, modified)?\))?\n$`).MatchString(out) {
		t.Fatalf("version: exit %d: %q %q", code, out, errOut)
	}
	if code, out, _ := cli(t, "help"); code != 0 || !strings.Contains(out, "\n  version ") {
		t.Fatalf("usage does not list version:\n%s", out)
	}
	if code, _, errOut := cli(t, "version", "extra"); code != 2 {
		t.Fatalf("version extra: exit %d, want 2: %s", code, errOut)
	}
}

// The version line from each shape of build info: a release, a checkout
// with a modified tree, a clean revision, --json, and none at all.
func TestVersionFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		info *debug.BuildInfo
		args []string
		want string
	}{
		{&debug.BuildInfo{Main: debug.Module{Path: "github.com/sqsonce/sqsonce", Version: "v0.1.0"}}, nil,
			"sqs-redrive v0.1.0\n"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc1234def5678901234567890abcdef12345678"}, {Key: "vcs.modified", Value: "true"}}}, nil,
			"sqs-redrive (devel) (abc1234def56, modified)\n"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc1234def5678901234567890abcdef12345678"}, {Key: "vcs.modified", Value: "false"}}}, nil,
			"sqs-redrive v0.1.0 (abc1234def56)\n"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}, GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc1234def5678901234567890abcdef12345678"}, {Key: "vcs.modified", Value: "true"}}}, []string{"--json"},
			`{"go":"go1.26.8","modified":true,"revision":"abc1234def5678901234567890abcdef12345678","version":"v0.1.0"}` + "\n"},
		{nil, nil, "sqs-redrive (unknown version: built without module information)\n"},
	} {
		var stdout, stderr bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, buildInfo: func() (*debug.BuildInfo, bool) { return c.info, c.info != nil }}
		if code := a.run(context.Background(), append([]string{"version"}, c.args...)); code != 0 || stdout.String() != c.want {
			t.Errorf("version %v: exit %d, %q, want %q (stderr %q)", c.args, code, stdout.String(), c.want, stderr.String())
		}
	}
}
