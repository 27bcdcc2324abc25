//go:build linux

// Tests of stack.sh, the no-Docker local stack script. They run it against
// fake emulators installed into a fake cache: small Node servers that bind
// the way the real ones do (fauxqs on every interface and exiting when its
// port is taken; DynamoDB Local on every interface and still running when its
// port is taken; local-aws-sqs on 127.0.0.1). Each test has its own state
// folder, cache and ports, needs no network, and stops only what it started,
// so the tests are safe next to a running stack. stack.sh reads /proc, so
// they build on Linux only.
package localstack_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The versions stack.sh installs: the fake cache uses its folder names.
const (
	fauxqsDir       = "fauxqs-1.9.2"
	localAWSSQSDir  = "local-aws-sqs-2.0.2"
	dynamoDir       = "dynamodb-local-2.9.30"
	dynamoTarball   = "amplify-dynamodb-simulator-2.9.30.tgz"
	installedMarker = ".sqsonce-complete"
)

// fakeServer is required by every fake emulator. It records its PID in
// $FAKE_PIDS, answers every HTTP request with "fake <name>", and on a taken
// port logs what the real server logs, then exits or (DynamoDB Local) keeps
// running without a port.
const fakeServer = `const fs = require("fs"), http = require("http"), path = require("path");
exports.serve = (name, port, host, keepRunning) => new Promise((resolve) => {
  fs.writeFileSync(path.join(process.env.FAKE_PIDS, String(process.pid)), name);
  if (process.env.FAKE_IGNORE_TERM === name) process.on("SIGTERM", () => {});
  const server = http.createServer((req, res) => res.end("fake " + name));
  server.on("error", (err) => {
    console.error(keepRunning ? "Caused by: java.net.BindException: Address already in use" : err.stack);
    if (keepRunning) setInterval(() => {}, 1 << 30);
    else process.exit(1);
  });
  server.listen(Number(port), host, () => { console.log("listening"); resolve(); });
});
`

// stack is one test's copy of the stack: its own state folder, fake cache,
// fake tools first in PATH, and a folder where the fake servers record their
// PIDs.
type stack struct {
	t      *testing.T
	script string
	state  string
	cache  string
	bin    string
	pids   string
	extra  []string // more environment, for one run
}

func newStack(t *testing.T) *stack {
	t.Helper()
	for _, tool := range []string{"bash", "node", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("stack.sh needs %s: %v", tool, err)
		}
	}
	script, err := filepath.Abs("stack.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &stack{
		t:      t,
		script: script,
		state:  filepath.Join(dir, "state"),
		cache:  filepath.Join(dir, "cache"),
		bin:    filepath.Join(dir, "bin"),
		pids:   filepath.Join(dir, "pids"),
	}
	fake := filepath.Join(s.bin, "fake-server.cjs")
	s.write(fake, fakeServer, 0o644)
	s.write(filepath.Join(s.cache, fauxqsDir, "node_modules/fauxqs/dist/app.js"),
		fmt.Sprintf("exports.startFauxqs = () => require(%q).serve(\"fauxqs\", process.env.FAUXQS_PORT, \"0.0.0.0\", false);\n", fake), 0o644)
	s.write(filepath.Join(s.cache, localAWSSQSDir, "node_modules/local-aws-sqs/dist/index.js"),
		fmt.Sprintf("exports.createSqsServer = (o) => require(%q).serve(\"movetask\", o.port, o.hostname, false);\n", fake), 0o644)
	s.write(filepath.Join(s.cache, dynamoDir, "DynamoDBLocal.jar"), "", 0o644)
	for _, d := range []string{fauxqsDir, localAWSSQSDir, dynamoDir} {
		s.write(filepath.Join(s.cache, d, installedMarker), "", 0o644)
	}
	// java -Xmx1g -Djava.library.path=... -jar DynamoDBLocal.jar -inMemory -port N
	s.write(filepath.Join(s.bin, "java"), fmt.Sprintf(`#!/usr/bin/env node
const a = process.argv;
require(%q).serve("dynamodb", a[a.indexOf("-port") + 1], "::", true);
`, fake), 0o755)
	// npm pack copies $FAKE_TGZ, or fails the way npm does without a registry.
	s.write(filepath.Join(s.bin, "npm"), `#!/bin/sh
echo "$*" >>"$FAKE_NPM_LOG"
if [ -n "$FAKE_NPM_FAIL" ]; then
	echo "npm error code E404" >&2
	echo "npm error 404 Not Found - GET amplify-dynamodb-simulator - fake registry says no" >&2
	exit 1
fi
case $1 in
pack) cp "$FAKE_TGZ" . && basename "$FAKE_TGZ" ;;
*) echo "fake npm: $1 not faked" >&2; exit 1 ;;
esac
`, 0o755)
	if err := os.MkdirAll(s.pids, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.cleanup)
	return s
}

func (s *stack) write(path, content string, mode os.FileMode) {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		s.t.Fatal(err)
	}
}

// environ is the test's environment without any stack setting of the
// caller's, plus this stack's folders.
func (s *stack) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SQSONCE_") || strings.HasPrefix(k, "FAUXQS_") || strings.HasPrefix(k, "FAKE_") || k == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PATH="+s.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SQSONCE_CACHE="+s.cache,
		"SQSONCE_STACK_DIR="+s.state,
		"SQSONCE_STACK_POSTGRES=0", // these tests are about the emulators
		"SQSONCE_STACK_BROWSER=0",
		"FAKE_PIDS="+s.pids,
		"FAKE_NPM_LOG="+filepath.Join(s.bin, "npm.log"),
		"FAKE_TGZ="+filepath.Join(s.bin, dynamoTarball),
	)
	return append(env, s.extra...)
}

// run runs stack.sh with args and returns its stderr (where it reports).
func (s *stack) run(args ...string) (string, error) {
	s.t.Helper()
	cmd := exec.CommandContext(s.t.Context(), "bash", append([]string{s.script}, args...)...)
	cmd.Env = s.environ()
	var stderr bytes.Buffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	err := cmd.Run()
	s.t.Logf("stack.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	return stderr.String(), err
}

func (s *stack) mustRun(args ...string) string {
	s.t.Helper()
	out, err := s.run(args...)
	if err != nil {
		s.t.Fatalf("stack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// fakes maps each fake server's PID to its name, from what the servers
// recorded themselves.
func (s *stack) fakes() map[int]string {
	s.t.Helper()
	entries, err := os.ReadDir(s.pids)
	if err != nil {
		s.t.Fatal(err)
	}
	m := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, err := os.ReadFile(filepath.Join(s.pids, e.Name()))
		if err != nil {
			s.t.Fatal(err)
		}
		m[pid] = string(name)
	}
	return m
}

// ours reports whether pid is a running fake server of this test: its
// environment names this test's PID folder.
func (s *stack) ours(pid int) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && bytes.Contains(env, []byte("\x00FAKE_PIDS="+s.pids+"\x00")) && alive(pid)
}

// running lists the fake servers still running, as "name (PID n)".
func (s *stack) running() []string {
	var r []string
	for pid, name := range s.fakes() {
		if s.ours(pid) {
			r = append(r, fmt.Sprintf("%s (PID %d)", name, pid))
		}
	}
	return r
}

// fakePID is the PID of the running fake server with this name.
func (s *stack) fakePID(name string) int {
	s.t.Helper()
	for pid, n := range s.fakes() {
		if n == name && s.ours(pid) {
			return pid
		}
	}
	s.t.Fatalf("no running fake %s", name)
	return 0
}

// endpoints reads the env file's endpoints.
func (s *stack) endpoints() map[string]string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.state, "env"))
	if err != nil {
		s.t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok && strings.HasPrefix(v, "http://") {
			m[k] = v
		}
	}
	return m
}

// cleanup stops what the test started: stack.sh down, then any fake server
// of this test still running.
func (s *stack) cleanup() {
	cmd := exec.Command("bash", s.script, "down")
	cmd.Env = s.environ()
	_ = cmd.Run()
	for pid := range s.fakes() {
		if s.ours(pid) {
			s.t.Errorf("fake server PID %d still running after the test", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// alive reports whether pid runs (a zombie has exited).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(b)
}

// foreign is another process's server on a loopback port.
func foreign(t *testing.T) (port string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "foreign")
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

var servers = []struct{ name, endpointVar, portVar string }{
	{"fauxqs", "AWS_ENDPOINT_URL_SQS", "SQSONCE_SQS_PORT"},
	{"dynamodb", "AWS_ENDPOINT_URL_DYNAMODB", "SQSONCE_DYNAMODB_PORT"},
	{"movetask", "SQSONCE_MOVE_TASK_ENDPOINT", "SQSONCE_MOVE_TASK_PORT"},
}

// TestUpRetriesPortTakenAfterChoosing hands every server, as its first
// choice, a port another server holds (as if that server took it between
// choosing and binding): up must start each on another port and point the
// env file at our servers, never at the foreign one.
func TestUpRetriesPortTakenAfterChoosing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	port := foreign(t)
	s.extra = []string{"SQSONCE_STACK_OFFER_PORTS=" + strings.Repeat(port+" ", 3)}
	out := s.mustRun("up")
	if got := strings.Count(out, "port "+port+" was taken by another process"); got != 3 {
		t.Errorf("up reported the taken port %d times, want 3 (once per server)", got)
	}
	ep := s.endpoints()
	for _, srv := range servers {
		url := ep[srv.endpointVar]
		if strings.HasSuffix(url, ":"+port) {
			t.Errorf("%s=%s: the foreign server's port", srv.endpointVar, url)
			continue
		}
		if got := get(t, url); got != "fake "+srv.name {
			t.Errorf("%s=%s answers %q, want %q", srv.endpointVar, url, got, "fake "+srv.name)
		}
	}
	s.mustRun("status")
	s.mustRun("down")
	if r := s.running(); len(r) > 0 {
		t.Errorf("still running after down: %v", r)
	}
	if got := get(t, "http://127.0.0.1:"+port); got != "foreign" {
		t.Errorf("the foreign server answers %q after down, want foreign", got)
	}
}

// TestUpFailsOnFixedPortHeldByAnother gives each server in turn a fixed port
// that another server holds: up must fail, say so, write no env file and
// leave none of its servers running. DynamoDB Local is the hard case: it
// keeps running without its port.
func TestUpFailsOnFixedPortHeldByAnother(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t)
			port := foreign(t)
			s.extra = []string{srv.portVar + "=" + port}
			out, err := s.run("up")
			if err == nil {
				t.Fatalf("up succeeded with %s=%s held by another server; env: %v", srv.portVar, port, s.endpoints())
			}
			if want := srv.name + ": port " + port + " (" + srv.portVar + ") is held by another process"; !strings.Contains(out, want) {
				t.Errorf("up said %q, want it to contain %q", out, want)
			}
			if _, err := os.Stat(filepath.Join(s.state, "env")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("env file after a failed up: %v", err)
			}
			if r := s.running(); len(r) > 0 {
				t.Errorf("still running after a failed up: %v", r)
			}
		})
	}
}

// TestStalePIDFileNamesAnotherProcess puts in the state folder PID files
// that name a live, unrelated process whose command line mentions fauxqs
// (someone's `tail -f fauxqs.log`), as after a reboot or PID reuse: down must
// leave it alone, and up must start fresh servers and not count it as one.
func TestStalePIDFileNamesAnotherProcess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, format string }{
		{"reused PID", "%d 1\n"},                // this PID and the start time of the process that had it
		{"file from an older stack.sh", "%d\n"}, // no start time
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t)
			if err := os.MkdirAll(s.state, 0o755); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(s.state, "fauxqs.log")
			s.write(log, "", 0o644)
			other := exec.Command("tail", "-f", log)
			if err := other.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
			writePIDs := func() {
				for _, srv := range servers {
					s.write(filepath.Join(s.state, srv.name+".pid"), fmt.Sprintf(tc.format, other.Process.Pid), 0o644)
				}
			}

			writePIDs()
			s.mustRun("down")
			if !alive(other.Process.Pid) {
				t.Fatalf("down killed PID %d, an unrelated process named by a stale PID file", other.Process.Pid)
			}

			writePIDs()
			s.mustRun("up")
			if !alive(other.Process.Pid) {
				t.Fatalf("up killed PID %d, an unrelated process named by a stale PID file", other.Process.Pid)
			}
			if got := get(t, s.endpoints()["AWS_ENDPOINT_URL_SQS"]); got != "fake fauxqs" {
				t.Errorf("SQS endpoint answers %q after up, want fake fauxqs", got)
			}
			s.mustRun("down")
			if !alive(other.Process.Pid) {
				t.Fatalf("down killed PID %d", other.Process.Pid)
			}
			if r := s.running(); len(r) > 0 {
				t.Errorf("still running after down: %v", r)
			}
		})
	}
}

// TestDownStopsServerOfOlderScript: a PID file from before start times were
// recorded names a server with the exact command line the older script used,
// holding the port in the env file; down must stop it.
func TestDownStopsServerOfOlderScript(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	cli := filepath.Join(s.cache, fauxqsDir, "node_modules/fauxqs/dist/cli.js")
	s.write(cli, fmt.Sprintf("require(%q).serve(\"fauxqs\", process.env.FAUXQS_PORT, \"0.0.0.0\", false);\n",
		filepath.Join(s.bin, "fake-server.cjs")), 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old := exec.Command("node", cli)
	old.Env = append(s.environ(), "FAUXQS_PORT="+port)
	stdout, err := old.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Process.Kill(); _ = old.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "listening\n" {
		t.Fatalf("the old server said %q, %v", line, err)
	}
	s.write(filepath.Join(s.state, "env"), "export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:"+port+"\n", 0o644)
	s.write(filepath.Join(s.state, "fauxqs.pid"), fmt.Sprintf("%d\n", old.Process.Pid), 0o644)
	s.mustRun("down")
	if alive(old.Process.Pid) {
		t.Errorf("down left the server started by an older stack.sh (PID %d) running", old.Process.Pid)
	}
}

// TestDownKillsItsOwnServerThatIgnoresSIGTERM: a server of ours that stays
// after SIGTERM is SIGKILLed.
func TestDownKillsItsOwnServerThatIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.extra = []string{"FAKE_IGNORE_TERM=fauxqs"}
	s.mustRun("up")
	out := s.mustRun("down")
	if !strings.Contains(out, "fauxqs (PID ") || !strings.Contains(out, "ignored SIGTERM") {
		t.Errorf("down said %q, want it to report SIGKILL after an ignored SIGTERM", out)
	}
	if r := s.running(); len(r) > 0 {
		t.Errorf("still running after down: %v", r)
	}
}

// TestStatusNeedsAnAnswer stops (SIGSTOP) the SQS server: it is alive and
// its port accepts connections, but it answers nothing, so status must fail.
func TestStatusNeedsAnAnswer(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.mustRun("up")
	s.mustRun("status")
	pid := s.fakePID("fauxqs")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out, err := s.run("status")
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		t.Fatalf("status succeeded while the SQS server answered nothing: %q", out)
	}
	if !strings.Contains(out, "fauxqs on 127.0.0.1:") || !strings.Contains(out, "does not answer") {
		t.Errorf("status said %q, want it to name fauxqs as not answering", out)
	}
	s.mustRun("status")
}

// TestWithStack runs a command under with-stack.sh: with the stack down it
// starts it for the command and stops it after; a running stack is used and
// left running.
func TestWithStack(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	withStack := func() string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(filepath.Dir(s.script), "with-stack.sh"),
			"sh", "-c", `echo "$SQSONCE_INTEGRATION $AWS_ENDPOINT_URL_SQS"`)
		cmd.Env = s.environ()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("with-stack.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}

	if got := withStack(); !strings.HasPrefix(got, "1 http://127.0.0.1:") {
		t.Errorf("the command saw %q, want SQSONCE_INTEGRATION=1 and the SQS endpoint", got)
	}
	if r := s.running(); len(r) > 0 {
		t.Errorf("with-stack.sh left running what it started: %v", r)
	}

	s.mustRun("up")
	sqs := s.endpoints()["AWS_ENDPOINT_URL_SQS"]
	if got := withStack(); got != "1 "+sqs {
		t.Errorf("the command saw %q, want %q", got, "1 "+sqs)
	}
	s.mustRun("status")
}

// dynamoTGZ is what npm pack of amplify-dynamodb-simulator yields, reduced to
// the files stack.sh uses.
func dynamoTGZ(t *testing.T, path string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/emulator/DynamoDBLocal.jar":                   "jar",
		"package/emulator/DynamoDBLocal_lib/libsqlite4java.so": "lib",
		"package/package.json":                                 "{}",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInstallRedoesInterruptedUnpack leaves DynamoDB Local half unpacked (the
// jar is there, its libraries and the completion marker are not), as after an
// interrupted install: install must unpack it again, then trust the marker.
// When npm fails, its own error must reach the user.
func TestInstallRedoesInterruptedUnpack(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := filepath.Join(s.cache, dynamoDir)
	if err := os.Remove(filepath.Join(dir, installedMarker)); err != nil {
		t.Fatal(err)
	}
	s.write(filepath.Join(dir, "half-unpacked"), "", 0o644)
	npmLog := filepath.Join(s.bin, "npm.log")
	dynamoTGZ(t, filepath.Join(s.bin, dynamoTarball))

	s.extra = []string{"FAKE_NPM_FAIL=1"}
	out, err := s.run("install")
	if err == nil {
		t.Fatalf("install succeeded with a half-unpacked DynamoDB Local and npm failing: %q", out)
	}
	if !strings.Contains(out, "fake registry says no") {
		t.Errorf("install said %q, want npm's own error in it", out)
	}
	if _, err := os.Stat(filepath.Join(dir, installedMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("completion marker after a failed install: %v", err)
	}

	s.extra = nil
	s.mustRun("install")
	if b, _ := os.ReadFile(npmLog); !strings.Contains(string(b), "pack ") || strings.Count(string(b), "\n") != 2 {
		t.Errorf("npm calls %q, want two packs of amplify-dynamodb-simulator (the failed one, then this one)", b)
	}
	for _, f := range []string{installedMarker, "DynamoDBLocal.jar", "DynamoDBLocal_lib/libsqlite4java.so"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("after install: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "half-unpacked")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the half-unpacked folder was kept: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(s.cache, "*.tmp.*")); len(left) > 0 {
		t.Errorf("work folders left in the cache: %v", left)
	}

	s.mustRun("install")
	if b, _ := os.ReadFile(npmLog); strings.Count(string(b), "\n") != 2 {
		t.Errorf("npm calls %q: a complete install was installed again", b)
	}
}

// TestInstallKeepsNPMInstallOfOlderScript: an older stack.sh wrote no marker
// but moved an npm install into place only after npm succeeded, so a folder
// with npm's hidden lockfile is kept; one without it is installed again.
func TestInstallKeepsNPMInstallOfOlderScript(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fauxqs := filepath.Join(s.cache, fauxqsDir)
	if err := os.Remove(filepath.Join(fauxqs, installedMarker)); err != nil {
		t.Fatal(err)
	}
	s.write(filepath.Join(fauxqs, "node_modules/.package-lock.json"), "{}", 0o644)
	s.write(filepath.Join(fauxqs, "node_modules/fauxqs/package.json"), "{}", 0o644)
	s.mustRun("install")
	if _, err := os.Stat(filepath.Join(fauxqs, installedMarker)); err != nil {
		t.Errorf("the older script's finished install was not marked: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(s.bin, "npm.log")); err == nil {
		t.Errorf("npm ran: %q", b)
	}

	other := filepath.Join(s.cache, localAWSSQSDir)
	if err := os.Remove(filepath.Join(other, installedMarker)); err != nil {
		t.Fatal(err)
	}
	out, err := s.run("install")
	if err == nil || !strings.Contains(out, "npm install local-aws-sqs@") {
		t.Errorf("install of a folder without marker or lockfile: %v, %q; want npm install to run (the fake fails)", err, out)
	}
}

// TestInstallNeedsNode20 runs install with Debian 12's Node 18 first in PATH.
func TestInstallNeedsNode20(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.write(filepath.Join(s.bin, "node"), "#!/bin/sh\necho v18.19.0\n", 0o755)
	out, err := s.run("install")
	if err == nil {
		t.Fatalf("install succeeded with Node 18: %q", out)
	}
	if !strings.Contains(out, "node 18.19.0 is too old") || !strings.Contains(out, "Node.js 20 or newer") {
		t.Errorf("install said %q, want it to name the old version and ask for Node.js 20 or newer", out)
	}
}

// TestConsoleStartedAndStoppedWithTheStack checks `stack.sh console`: it
// refuses without a running stack, starts the console with the env file's
// variables, prints the console's URL line once the console printed it,
// keeps the log (which holds the token) to its owner, and `down` stops
// the console with the servers.
func TestConsoleStartedAndStoppedWithTheStack(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fake := filepath.Join(s.bin, "fake-console.cjs")
	s.write(fake, `const fs = require("fs"), path = require("path");
fs.writeFileSync(path.join(process.env.FAKE_PIDS, String(process.pid)), "console");
setTimeout(() => console.log("console on http://127.0.0.1:1/?token=t0ken sqs=" + process.env.AWS_ENDPOINT_URL_SQS), 300);
setInterval(() => {}, 1 << 30);
`, 0o644)
	console := func() (string, error) {
		cmd := exec.CommandContext(t.Context(), "bash", s.script, "console", "node", fake)
		cmd.Env = s.environ()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		t.Logf("stack.sh console: %v\n%s", err, stderr.String())
		return stdout.String(), err
	}
	if _, err := console(); err == nil {
		t.Fatal("console started without a running stack")
	}
	s.mustRun("up")
	out, err := console()
	if err != nil {
		t.Fatal(err)
	}
	want := "console on http://127.0.0.1:1/?token=t0ken sqs=" + s.endpoints()["AWS_ENDPOINT_URL_SQS"] + "\n"
	if out != want {
		t.Fatalf("stack.sh console printed %q, want %q", out, want)
	}
	pid := s.fakePID("console")
	st, err := os.Stat(filepath.Join(s.state, "console.log"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("console.log: %v %v, want mode 0600", st.Mode(), err)
	}
	s.mustRun("down")
	if alive(pid) {
		t.Fatalf("the console (PID %d) still runs after down", pid)
	}
}
