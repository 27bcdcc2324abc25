//go:build linux

package localstack_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestPostgresUpRetriesPortHeldByAClient offers postgres.sh, as its first
// port, the local port of a client connection: nothing answers there, yet
// the bind fails (ports chosen at random can land in the ephemeral range,
// where a busy machine's clients hold many). up must start the server on
// another port and write that one to the env file. It runs a real server
// in its own folder, so it needs PostgreSQL 15 (skipped without it unless
// SQSONCE_INTEGRATION=1).
func TestPostgresUpRetriesPortHeldByAClient(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err != nil && os.Getenv("PG_BINDIR") == "" {
		if testenv.Required() {
			t.Fatalf("SQSONCE_INTEGRATION=1 but PostgreSQL 15 is not installed (run localstack/postgres.sh up once)")
		}
		t.Skip("PostgreSQL 15 is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	held := strconv.Itoa(client.LocalAddr().(*net.TCPAddr).Port)

	// The server runs as the postgres user when we are root: it must reach
	// its folder, which t.TempDir makes private.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(dir, "pg")
	run := func(args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{"postgres.sh"}, args...)...)
		cmd.Env = append(os.Environ(), "SQSONCE_POSTGRES_DIR="+state, "SQSONCE_POSTGRES_OFFER_PORTS="+held, "SQSONCE_POSTGRES_PORT=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("up")
	t.Cleanup(func() {
		if out, err := run("down"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if !strings.Contains(out, "port "+held+" was taken: trying another") {
		t.Errorf("up did not report the held port %s:\n%s", held, out)
	}
	env, err := os.ReadFile(filepath.Join(state, "env"))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(env))
	if strings.Contains(line, "127.0.0.1:"+held+"/") || !strings.Contains(line, "@127.0.0.1:") {
		t.Fatalf("env file %q: want a URL on a port other than the held %s", line, held)
	}
	if out, err := run("status"); err != nil {
		t.Errorf("status after up: %v\n%s", err, out)
	}
}
