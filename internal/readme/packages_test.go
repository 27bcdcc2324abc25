package readme_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// packageRow matches a row of the package table: its first cell is one
// package path in backticks, relative to the module ("consumer",
// "cmd/sqs-redrive"), or a group of them ("examples/...").
var packageRow = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// tablePackages returns the package column of the table under the
// heading "## The packages" of the page at path.
func tablePackages(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		rows    []string
		section bool
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			if section {
				return rows
			}
			section = line == "## The packages"
		case section:
			if m := packageRow.FindStringSubmatch(line); m != nil {
				rows = append(rows, m[1])
			} else if len(rows) > 0 && !strings.HasPrefix(line, "|") {
				return rows // the end of the table
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// modulePackages lists the module's packages, as `go list ./...` does,
// relative to the module path and without those under internal/.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	// -e lists a package whose files this platform's build constraints
	// exclude (localstack's tests build on Linux only).
	cmd := exec.Command(goTool, "list", "-e", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	modCmd := exec.Command(goTool, "list", "-m")
	modCmd.Dir = root
	modCmd.Env = cmd.Env
	mod, err := modCmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(mod)) + "/"
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok || strings.Contains("/"+rel+"/", "/internal/") {
			continue
		}
		pkgs = append(pkgs, rel)
	}
	return pkgs
}

// The package table of docs/architecture.md has one row for each package
// of the module outside internal/ (a row "dir/..." stands for every package
// under dir), and no row for a package that does not exist.
func TestArchitecturePackageTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rows := tablePackages(t, filepath.Join(root, "docs", "architecture.md"))
	if len(rows) == 0 {
		t.Fatal(`docs/architecture.md: no package table under "## The packages"`)
	}
	pkgs := modulePackages(t, root)
	if len(pkgs) == 0 {
		t.Fatal("go list ./... listed no package outside internal/")
	}
	covers := func(row, pkg string) bool {
		if dir, ok := strings.CutSuffix(row, "/..."); ok {
			return pkg == dir || strings.HasPrefix(pkg, dir+"/")
		}
		return pkg == row
	}
	seen := map[string]bool{}
	for _, row := range rows {
		if seen[row] {
			t.Errorf("docs/architecture.md: package %s has two rows", row)
		}
		seen[row] = true
		if !slices.ContainsFunc(pkgs, func(p string) bool { return covers(row, p) }) {
			t.Errorf("docs/architecture.md: the package table lists %s, which go list ./... does not: remove or rename its row", row)
		}
	}
	for _, p := range pkgs {
		n := 0
		for _, row := range rows {
			if covers(row, p) {
				n++
			}
		}
		switch {
		case n == 0:
			t.Errorf("docs/architecture.md: package %s has no row in the package table: add one with its role", p)
		case n > 1:
			t.Errorf("docs/architecture.md: package %s is covered by %d rows of the package table", p, n)
		}
	}
}
