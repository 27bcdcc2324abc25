package deadletter_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// classConstants returns the values of the package's Class* constants,
// read from its source so that a class added to the code is caught here.
func classConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "deadletter.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var classes []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Class") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s is not a string literal", name.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				classes = append(classes, v)
			}
		}
	}
	slices.Sort(classes)
	return classes
}

// docClasses matches docs/architecture.md's list of the classes a dead
// letter's sqsonce-failure records: "`class` is one of `a`, `b`, … or a
// user's own class".
var docClasses = regexp.MustCompile("`class` is (?:one of )?(.*?)or a user's own")

// The failure classes docs/architecture.md lists are the package's class
// constants, no more and no fewer.
func TestArchitectureDocListsClasses(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	m := docClasses.FindStringSubmatch(text)
	if m == nil {
		t.Fatal("docs/architecture.md: no \"`class` is … or a user's own\" list of the failure classes")
	}
	var listed []string
	for _, q := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[1], -1) {
		listed = append(listed, q[1])
	}
	slices.Sort(listed)
	if want := classConstants(t); !slices.Equal(listed, want) {
		t.Errorf("docs/architecture.md lists the classes %q; the code's Class constants are %q", listed, want)
	}
}
