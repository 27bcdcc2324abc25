package readme_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// internalDir reports whether the slash-separated path has an element
// named internal: Go lets only the tree rooted at internal's parent
// import it, so a reader's module cannot.
func internalDir(path string) bool {
	return strings.Contains("/"+path+"/", "/internal/")
}

// testFile is a parsed _test.go file of the module.
type testFile struct {
	rel     string // slash-separated, relative to the module's root
	ast     *ast.File
	example bool // an example file: named example*_test.go or declaring an Example function
}

// exampleFiles parses every _test.go file of the module outside internal/
// (and testdata), by directory, and marks those a reader reads as
// examples.
func exampleFiles(t *testing.T) (*token.FileSet, map[string][]*testFile) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	dirs := map[string][]*testFile{}
	examples := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || internalDir(rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		// Object resolution (no SkipObjectResolution) lists in
		// File.Unresolved the identifiers the file uses but does not
		// declare.
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		tf := &testFile{rel: rel, ast: f, example: strings.HasPrefix(d.Name(), "example")}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
				tf.example = true
			}
		}
		if tf.example {
			examples++
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		dirs[dir] = append(dirs[dir], tf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if examples == 0 {
		t.Fatal("found no example file outside internal/: the walk is broken")
	}
	return fset, dirs
}

// Examples are documentation a reader copies into a module of their own,
// which cannot import a package under internal/: no example file outside
// internal/ imports one. (An example that needs a fake SQS defines a
// small one in its own file, implementing the package's narrow interface,
// or uses a public helper such as consumer/consumertest; a scenario that
// needs the full in-process fake is a test.)
func TestExamplesImportNoInternalPackage(t *testing.T) {
	fset, dirs := exampleFiles(t)
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		files := dirs[dir]
		for _, f := range files {
			if !f.example {
				continue
			}
			for _, imp := range f.ast.Imports {
				p, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					t.Fatal(err)
				}
				if internalDir(p) {
					t.Errorf("%s:%d: an example imports %s, which a reader's module cannot import: define the fake it needs in the file, or use a public helper (consumer/consumertest)",
						f.rel, fset.Position(imp.Pos()).Line, p)
				}
			}
		}
	}
}

// An example shows all the code it runs: its file uses no function, type,
// variable or constant declared in another _test.go file of its package,
// which a reader of the example does not see (and which may hide an
// import of internal/).
func TestExamplesUseOnlyTheirOwnFile(t *testing.T) {
	fset, dirs := exampleFiles(t)
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		files := dirs[dir]
		for _, f := range files {
			if !f.example {
				continue
			}
			for _, id := range f.ast.Unresolved {
				for _, other := range files {
					if other == f || other.ast.Name.Name != f.ast.Name.Name || other.ast.Scope.Lookup(id.Name) == nil {
						continue
					}
					t.Errorf("%s:%d: an example uses %s, declared in %s, which its reader does not see: declare it in the example's file",
						f.rel, fset.Position(id.Pos()).Line, id.Name, other.rel)
				}
			}
		}
	}
}
