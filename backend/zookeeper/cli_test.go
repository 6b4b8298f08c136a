package zookeeper_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
)

// The CLI end to end on ZooKeeper, as a user runs it: the locktest binary,
// built once for these tests.
var (
	binOnce sync.Once
	bin     string
	binErr  error
	binDir  string
)

// The tests here mostly wait (on their ensembles, sessions expiring, a
// run's clock): they run four at once (internal/partest).
func TestMain(m *testing.M) {
	partest.Raise()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func locktest(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "zookeeper-cli-test-"); binErr != nil {
			return
		}
		bin = filepath.Join(binDir, "locktest")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/locktest/locktest/cmd/locktest").CombinedOutput()
		if err != nil {
			binErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return bin
}

// run runs locktest with args and returns its exit status and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(locktest(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// runDir is the one run directory under out ("" while there is none).
func runDir(out string) string {
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if e.IsDir() {
			return filepath.Join(out, e.Name())
		}
	}
	return ""
}

// Without ZooKeeper's jars a ZooKeeper recipe is refused in one line that
// says what to install, before anything starts.
func TestNotInstalled(t *testing.T) {
	// A temp directory of its own: a run first sweeps what killed runs
	// left in it and says so on stderr (here, once, another test
	// process's etcd directory), which is not the line this test reads.
	// (The binary is built first, in the shared one.)
	locktest(t)
	t.Setenv("TMPDIR", t.TempDir())
	out := t.TempDir()
	code, stdout, stderr := run(t, "run", "--recipe", "zk-lock", "--zk-classpath", "/nonexistent/zookeeper.jar", "--out", out)
	if code != 2 || !strings.Contains(stderr, "apt-get install zookeeper") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("a refused run left %v", ents)
	}
}

// A run of zk-lock under every fault ZooKeeper takes keeps the resource
// safe and the lock's contract, speaks of znodes and sessions, and leaves
// no server behind (none keeps a file open in the run's directory, as a
// server does its logs and data); a fault it cannot take is refused by
// name.
func TestRun(t *testing.T) {
	t.Parallel()
	zkserver.ForTest(t)
	out := t.TempDir()
	code, _, stderr := run(t, "run", "--recipe", "zk-lock", "--nemesis", "lease", "--out", out)
	if code != 2 || !strings.Contains(stderr, "needs leases, which zookeeper") {
		t.Fatalf("--nemesis lease: exit %d, stderr %q", code, stderr)
	}
	os.RemoveAll(out)
	code, stdout, stderr := run(t, "run", "--recipe", "zk-lock", "--nemesis", "all", "--require", "resource,contract",
		"--time", "8s", "--quiet", "4s", "--seed", "5", "--out", out)
	if code != 0 || !strings.Contains(stdout, "zookeeper 3.") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	dir := runDir(out)
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Config struct {
			Backend string `json:"backend"`
		} `json:"config"`
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Config.Backend != "zookeeper" {
		t.Errorf("results.json: backend %q (%v)", res.Config.Backend, err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"znode", "session"} {
		if !bytes.Contains(page, []byte(w)) {
			t.Errorf("the report page does not speak of %ss", w)
		}
	}
	polltest.Until(t, 10*time.Second, "the run's servers to be gone", func() bool { return !proc.Using(out) })
}

// A run stopped part way, by Ctrl-C (SIGINT) and by SIGKILL, leaves no
// server process behind, and its history on disk, checkable.
func TestStoppedRun(t *testing.T) {
	t.Parallel()
	zkserver.ForTest(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			cmd := exec.Command(locktest(t), "run", "--recipe", "zk-lock", "--nemesis", "pause,crash", "--time", "30s", "--seed", "4", "--out", out)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var servers []int
			polltest.Until(t, 90*time.Second, "the run to get going", func() bool {
				servers = proc.Children(cmd.Process.Pid)
				h, err := os.Stat(filepath.Join(runDir(out), "history.jsonl"))
				return len(servers) == 3 && err == nil && h.Size() > 2000
			})
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var ee *exec.ExitError
			if sig == syscall.SIGINT && (!errors.As(err, &ee) || ee.ExitCode() != 2) {
				t.Errorf("interrupted run exited with %v, want status 2", err)
			}
			polltest.Until(t, 10*time.Second, "the servers to be gone", func() bool { return !slices.ContainsFunc(servers, proc.Alive) })
			code, stdout, stderr := run(t, "check", filepath.Join(runDir(out), "history.jsonl"))
			if !strings.Contains(stdout, "verdict: ") || code == 0 && sig == syscall.SIGKILL {
				t.Fatalf("the history left by %v: exit %d\n%s\n%s", sig, code, stdout, stderr)
			}
		})
	}
}

// The broken recipe is caught by the check its mistake breaks: a waiter
// that takes the lock when the waiter ahead of it goes holds it beside the
// holder, whose znode was still there (contract, promise 3). No fault
// is needed for a waiter to go: every section is slow (2-4 s) and an
// acquire gives up after 3 s, so waiters give up while the holder holds.
// Left to random faults and the default workload, a loaded host's run of
// 130 operations gave up no waiter's place and broke nothing (exit 0).
func TestNoRecheckCaught(t *testing.T) {
	t.Parallel()
	zkserver.ForTest(t)
	out := t.TempDir()
	code, stdout, stderr := run(t, "run", "--recipe", "zk-no-recheck", "--require", "contract", "--time", "10s", "--quiet", "4s", "--seed", "1",
		"--nemesis", "none", "--slow-share", "1", "--op-timeout", "3s", "--out", out)
	if code != 1 || !strings.Contains(stdout, "Promise 3 (overlap only after loss)") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// zk-session-expiry: the resource is damaged unfenced, safe fenced.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	zkserver.ForTest(t)
	for _, mode := range []string{"unfenced", "fenced"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			_, stdout, stderr := run(t, "scenario", "run", "zk-session-expiry", "--resource", mode, "--seed", "3", "--out", t.TempDir())
			if !strings.Contains(stdout, "scenario zk-session-expiry: as expected") {
				t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}
