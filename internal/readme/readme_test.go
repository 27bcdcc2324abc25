// Package readme_test compiles every Go snippet of the repository's
// README.md and of its pages under docs/ (docs/*.md), so that what a
// reader copies builds as written, checks that the package table of
// docs/architecture.md lists the packages the module has, and that every
// example file outside internal/ shows all it runs and imports nothing a
// reader's module cannot (examples_test.go).
//
// Each block fenced as ```go is compiled, in a package of its own, by
// `go vet` in a throwaway module that requires this one through a
// replace directive (the module cache only: nothing is fetched that the
// repository itself does not need). A block that is not Go must not be
// fenced as go.
//
// A snippet says how to compile it in an HTML comment on the lines just
// before its fence (invisible on a rendered page):
//
//	<!-- snippet: body
//	var store *dedupedynamo.Store // declarations the snippet uses but does not show
//	-->
//
// The word after "snippet:" is the kind:
//
//   - body (the default, also without a comment): statements, wrapped in
//     `func _() error { … }` (a `return nil` is added unless the last
//     top-level line returns), so a snippet may `return err` or call
//     log.Fatal.
//   - file: top-level declarations, such as a `func main`.
//
// The rest of the comment is Go placed at the top level before the
// snippet: placeholders (variables, types, functions the snippet
// assumes) and imports. A package the snippet uses by its usual name is
// imported by the test (see imports below); import explicitly a package
// whose name is ambiguous (types) or aliased otherwise.
// Errors are reported at the page's own lines. To look at the module the
// test generates, set README_SNIPPETS_DIR to an empty directory.
package readme_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// imports are the packages a snippet may use by these names without
// importing them.
var imports = map[string]string{
	"aws":          "github.com/aws/aws-sdk-go-v2/aws",
	"config":       "github.com/aws/aws-sdk-go-v2/config",
	"consumer":     "github.com/sqsonce/sqsonce/consumer",
	"context":      "context",
	"dedupe":       "github.com/sqsonce/sqsonce/dedupe",
	"dedupedynamo": "github.com/sqsonce/sqsonce/dedupe/dedupedynamo",
	"dedupepg":     "github.com/sqsonce/sqsonce/dedupe/dedupepg",
	"dynamodb":     "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"envelope":     "github.com/sqsonce/sqsonce/envelope",
	"errors":       "errors",
	"fmt":          "fmt",
	"http":         "net/http",
	"idemdynamo":   "github.com/sqsonce/sqsonce/idempotency/idemdynamo",
	"idempg":       "github.com/sqsonce/sqsonce/idempotency/idempg",
	"idempotency":  "github.com/sqsonce/sqsonce/idempotency",
	"json":         "encoding/json",
	"lambda":       "github.com/aws/aws-lambda-go/lambda",
	"log":          "log",
	"os":           "os",
	"outbox":       "github.com/sqsonce/sqsonce/outbox",
	"outboxdynamo": "github.com/sqsonce/sqsonce/outbox/outboxdynamo",
	"outboxpg":     "github.com/sqsonce/sqsonce/outbox/outboxpg",
	"pgstore":      "github.com/sqsonce/sqsonce/pgstore",
	"pgx":          "github.com/jackc/pgx/v5",
	"pgxpool":      "github.com/jackc/pgx/v5/pgxpool",
	"producer":     "github.com/sqsonce/sqsonce/producer",
	"signal":       "os/signal",
	"s3client":     "github.com/sqsonce/sqsonce/awsconfig/s3client",
	"sqs":          "github.com/aws/aws-sdk-go-v2/service/sqs",
	"sqslambda":    "github.com/sqsonce/sqsonce/sqslambda",
	"syscall":      "syscall",
	"time":         "time",
	"zap":          "go.uber.org/zap",
	"zapcore":      "go.uber.org/zap/zapcore",
}

// snippet is one ```go block of a page.
type snippet struct {
	page     string // the page's path, as errors name it
	line     int    // the page's line of its first code line
	kind     string // "body" or "file"
	preamble string // Go from the snippet comment
	preLine  int    // the page's line of the preamble's first line
	code     string
}

var snippetComment = regexp.MustCompile(`^<!--\s*snippet:\s*(\w+)\s*$`)

// parse returns the Go snippets of the page at path, which errors name
// as name.
func parse(t *testing.T, path, name string) []snippet {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out     []snippet
		pending *snippet // a snippet comment waiting for its fence
		inBlock bool
		isGo    bool
		cur     *snippet
		code    []string
		pre     []string
		inPre   bool
		n       int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case inPre:
			if strings.TrimSpace(line) == "-->" {
				inPre = false
				pending.preamble = strings.Join(pre, "\n")
				continue
			}
			pre = append(pre, line)
		case inBlock:
			if strings.HasPrefix(line, "```") {
				inBlock = false
				if isGo {
					cur.code = strings.Join(code, "\n")
					out = append(out, *cur)
				}
				continue
			}
			code = append(code, line)
		case strings.HasPrefix(line, "```"):
			inBlock, isGo = true, strings.TrimSpace(strings.TrimPrefix(line, "```")) == "go"
			code = nil
			cur = &snippet{page: path, line: n + 1, kind: "body"}
			if pending != nil {
				cur.kind, cur.preamble, cur.preLine = pending.kind, pending.preamble, pending.preLine
				if !isGo {
					t.Errorf("%s:%d: a snippet comment before a block not fenced as go", name, n)
				}
			}
			pending = nil
		default:
			if m := snippetComment.FindStringSubmatch(line); m != nil {
				if m[1] != "body" && m[1] != "file" {
					t.Errorf("%s:%d: snippet kind %q: use body or file", name, n, m[1])
				}
				pending, inPre, pre = &snippet{kind: m[1], preLine: n + 1}, true, nil
			} else if pending != nil && strings.TrimSpace(line) != "" {
				t.Errorf("%s:%d: text between a snippet comment and its fence", name, n)
				pending = nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if inBlock || inPre {
		t.Fatalf("%s: a block or snippet comment is not closed", name)
	}
	return out
}

// importedName matches an import's name or last path element in the
// preamble: a package it imports itself.
var importedName = regexp.MustCompile(`(?m)^\s*(?:import\s+)?(\w+\s+)?"([^"]+)"`)

// lineComment matches a // comment (not the // of a URL in a string).
var lineComment = regexp.MustCompile(`(?m)(^|\s)//.*$`)

// source is the Go file of s, with //line directives pointing at its
// page.
func (s snippet) source() string {
	page := s.page
	var b strings.Builder
	b.WriteString("package snippet\n\n")
	own := map[string]bool{}
	for _, m := range importedName.FindAllStringSubmatch(s.preamble, -1) {
		name := strings.TrimSpace(m[1])
		if name == "" {
			name = filepath.Base(m[2])
		}
		own[name] = true
	}
	text := lineComment.ReplaceAllString(s.preamble+"\n"+s.code, "")
	var names []string
	for name := range imports {
		if !own[name] && regexp.MustCompile(`\b`+name+`\.`).MatchString(text) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) > 0 {
		b.WriteString("import (\n")
		for _, name := range names {
			fmt.Fprintf(&b, "\t%s %q\n", name, imports[name])
		}
		b.WriteString(")\n\n")
	}
	if s.preamble != "" {
		fmt.Fprintf(&b, "//line %s:%d\n%s\n\n", page, s.preLine, s.preamble)
	}
	if s.kind == "file" {
		fmt.Fprintf(&b, "//line %s:%d\n%s\n", page, s.line, s.code)
		return b.String()
	}
	b.WriteString("func _() error {\n")
	fmt.Fprintf(&b, "//line %s:%d\n%s\n", page, s.line, s.code)
	if !endsInReturn(s.code) {
		b.WriteString("return nil\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// endsInReturn reports whether the last top-level line of code returns.
func endsInReturn(code string) bool {
	lines := strings.Split(strings.TrimRight(code, "\n "), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "//") {
			continue
		}
		return strings.HasPrefix(l, "return")
	}
	return false
}

// pages returns README.md and the docs/*.md pages, as paths, and the
// names errors give them (relative to root).
func pages(t *testing.T, root string) (paths, names []string) {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		paths, names = append(paths, p), append(names, filepath.ToSlash(rel))
	}
	return paths, names
}

// Every ```go block of README.md and of docs/*.md compiles and vets.
func TestREADMESnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	paths, names := pages(t, root)
	var snippets []snippet
	for i, p := range paths {
		got := parse(t, p, names[i])
		if names[i] == "README.md" && len(got) == 0 {
			t.Fatal("README.md has no Go snippet: is the parser broken?")
		}
		snippets = append(snippets, got...)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// The module's own requirements, so that the snippets build against
	// the versions the repository does.
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module snippets")
	mod += fmt.Sprintf("\nrequire github.com/sqsonce/sqsonce v0.0.0\n\nreplace github.com/sqsonce/sqsonce => %s\n", root)
	dir := t.TempDir()
	if d := os.Getenv("README_SNIPPETS_DIR"); d != "" {
		dir = d
	}
	for name, body := range map[string][]byte{"go.mod": []byte(mod), "go.sum": gosum} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range snippets {
		pkg := filepath.Join(dir, fmt.Sprintf("s%03d", i))
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte(s.source()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to compile the snippets: %v", err)
	}
	cmd := exec.Command(goTool, "vet", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the Go snippets (%d) of README.md and docs/*.md do not compile or vet: %v\n%s", len(snippets), err, out)
	}
}
