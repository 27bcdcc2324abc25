package opshttp_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goList runs go list with args and returns its output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return strings.Fields(string(out))
}

// The dependency rule: opshttp links the standard library only (and the
// module's own escaping helper), and no package a program imports to
// consume, dedupe, publish or serve links the OpenTelemetry SDK or the
// Prometheus client, which only opshttp/prom (and the programs of the
// repository: examples, commands, benchmarks) may.
func TestDependencyRule(t *testing.T) {
	t.Parallel()
	deps := goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	if want := []string{"github.com/sqsonce/sqsonce/internal/printable", "github.com/sqsonce/sqsonce/opshttp"}; !slices.Equal(deps, want) {
		t.Errorf("opshttp links %v, want the standard library and %v only", deps, want)
	}

	const module = "github.com/sqsonce/sqsonce/"
	programs := []string{"examples/", "cmd/", "bench", "reliability", "localstack", "opshttp/prom"}
	for _, line := range goList(t, "-f", "{{.ImportPath}}|{{join .Deps \"|\"}}", module+"...") {
		pkg, deps, _ := strings.Cut(line, "|")
		rel := strings.TrimPrefix(pkg, module)
		if slices.ContainsFunc(programs, func(p string) bool { return strings.HasPrefix(rel, p) }) {
			continue
		}
		for dep := range strings.SplitSeq(deps, "|") {
			if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters/") || strings.HasPrefix(dep, "github.com/prometheus/") {
				t.Errorf("%s links %s: library packages depend on the OpenTelemetry API only", rel, dep)
				break
			}
		}
	}
}
