package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sqsonce/sqsonce"

// The example imports none of sqsonce's internal packages: a user's module
// could not build a copy of it otherwise. (Internal packages that the
// public ones import are theirs.)
func TestImportsOnlyPublicPackages(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue // tests may use the repository's test helpers
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if isInternal(path) {
				t.Errorf("%s imports %s, which a module outside sqsonce cannot import", f, path)
			}
		}
	}
}

// The example builds and vets as a module of its own would, with sqsonce
// as a dependency (replaced by this checkout): only what a user can
// import, and its go.mod as `go mod tidy` writes it. No network: the
// modules come from the module cache, where building this repository put
// them.
func TestBuildsAsAnOutsideModule(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goMod := "module example.com/payments\n\ngo 1.26.0\n\nrequire " + module + " v0.0.0-00010101000000-000000000000\n\nreplace " + module + " => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		t.Fatal(err)
	}
	// The checksums of every module the repository uses: a superset.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a module outside sqsonce: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("mod", "tidy")
	gocmd("vet", "./...")
	imports := strings.Fields(gocmd("list", "-f", `{{join .Imports " "}}`, "."))
	public := 0
	for _, path := range imports {
		if isInternal(path) {
			t.Errorf("the example imports %s", path)
		}
		if strings.HasPrefix(path, module+"/") {
			public++
		}
	}
	if public == 0 {
		t.Errorf("go list found no sqsonce import among %q", imports)
	}
}

// isInternal reports whether path is one of sqsonce's internal packages.
func isInternal(path string) bool {
	rest, ok := strings.CutPrefix(path, module+"/")
	return ok && (rest == "internal" || strings.HasPrefix(rest, "internal/") ||
		strings.HasSuffix(rest, "/internal") || strings.Contains(rest, "/internal/"))
}
