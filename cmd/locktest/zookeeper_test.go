package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/nemesis"
)

// The CLI end to end on ZooKeeper, as a user runs it: locktest in a
// process of its own (this test binary, as TestMain makes it with
// LOCKTEST_CLI_ARGS), whose ZooKeeper servers are its children. The runs
// go in TestRuns, beside the others.

// cliCommand is locktest with args in a process of its own (arguments
// without spaces).
func cliCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "LOCKTEST_CLI_ARGS="+strings.Join(args, " "))
	return cmd
}

// cliRun runs locktest with args in a process of its own and returns its
// exit status and output.
func cliRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := cliCommand(args...)
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

// Without ZooKeeper's jars a ZooKeeper recipe is refused in one line that
// says what to install, before anything starts.
func TestZooKeeperNotInstalled(t *testing.T) {
	// A temp directory of its own: a run first sweeps what killed runs
	// left in it and says so on stderr, which is not the line this test
	// reads.
	t.Setenv("TMPDIR", t.TempDir())
	out := t.TempDir()
	code, stdout, stderr := cliRun(t, "run", "--recipe", "zk-lock", "--zk-classpath", "/nonexistent/zookeeper.jar", "--out", out)
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
func testZooKeeperRun(t *testing.T) {
	zkserver.ForTest(t)
	out := t.TempDir()
	code, _, stderr := cliRun(t, "run", "--recipe", "zk-lock", "--nemesis", "lease", "--out", out)
	if code != 2 || !strings.Contains(stderr, "needs leases, which zookeeper") {
		t.Fatalf("--nemesis lease: exit %d, stderr %q", code, stderr)
	}
	os.RemoveAll(out)
	code, stdout, stderr := cliRun(t, "run", "--recipe", "zk-lock", "--nemesis", "all", "--require", "resource,contract",
		"--time", "8s", "--quiet", "4s", "--seed", "5", "--out", out)
	if code != 0 || !strings.Contains(stdout, "zookeeper 3.") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	dir := firstRunDir(out)
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

// A run stopped part way by Ctrl-C (SIGINT) exits 2, leaves no server
// process behind, and its history on disk, checkable. A run killed by
// SIGKILL leaves none either: the servers die with locktest (Pdeathsig,
// internal/proc), as etcd's member processes and redis-server do, which
// start alike (serverkit.Proc) and testKilledRuns kills under faults; a
// ZooKeeper run of its own for it took 5 s of CPU.
func testZooKeeperStoppedRun(t *testing.T) {
	zkserver.ForTest(t)
	out := t.TempDir()
	cmd := cliCommand("run", "--recipe", "zk-lock", "--nemesis", "pause,crash", "--time", "30s", "--seed", "4", "--out", out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var servers []int
	polltest.Until(t, 90*time.Second, "the run to get going", func() bool {
		servers = proc.Children(cmd.Process.Pid)
		h, err := os.Stat(filepath.Join(firstRunDir(out), "history.jsonl"))
		return len(servers) == 3 && err == nil && h.Size() > 2000
	})
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("interrupted run exited with %v, want status 2", err)
	}
	polltest.Until(t, 10*time.Second, "the servers to be gone", func() bool { return !slices.ContainsFunc(servers, proc.Alive) })
	code, stdout, stderr := cliRun(t, "check", filepath.Join(firstRunDir(out), "history.jsonl"))
	if !strings.Contains(stdout, "verdict: ") {
		t.Fatalf("the history left: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// The broken recipe is caught by the check its mistake breaks: a waiter
// that takes the lock when the waiter ahead of it goes holds it beside the
// holder, whose znode was still there (contract, promise 3). No fault
// is needed for a waiter to go: every section is slow (2-4 s) and an
// acquire gives up after 3 s, so waiters give up while the holder holds.
// Left to random faults and the default workload, a loaded host's run of
// 130 operations gave up no waiter's place and broke nothing (exit 0).
func testZooKeeperNoRecheckCaught(t *testing.T) {
	zkserver.ForTest(t)
	out := t.TempDir()
	code, stdout, stderr := cliRun(t, "run", "--recipe", "zk-no-recheck", "--require", "contract", "--time", "10s", "--quiet", "4s", "--seed", "1",
		"--nemesis", "none", "--slow-share", "1", "--op-timeout", "3s", "--out", out)
	if code == 0 {
		// A loaded host may not stage the mistake at all: acquires that
		// took longer than 3 s gave up before any grant (2 grants in 10 s
		// at load 36, the ensemble ready in 16.7 s). The run's valid is
		// then no catch missed; a run that staged it and found nothing is.
		ops, err := histories.ReadFile(filepath.Join(firstRunDir(out), "history.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if gaveUpBehindAHolder(ops) == 0 {
			t.Skipf("not staged: no waiter gave up while a client held the lock and another waited\nstdout:\n%s", stdout)
		}
	}
	if code != 1 || !strings.Contains(stdout, "Promise 3 (overlap only after loss)") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// gaveUpBehindAHolder counts the acquires that gave up (failed, or timed
// out in doubt) while another client held the lock and yet another
// waited: the moment zk-no-recheck's mistake needs. The waiter that gives
// up first has waited longest (every acquire gives up after the same
// time), so the other waits behind it, watching its znode, and takes the
// lock when it goes, beside the holder.
func gaveUpBehindAHolder(ops []histories.Op) int {
	holding, waiting := map[histories.Process]bool{}, map[histories.Process]bool{}
	n := 0
	for _, op := range ops {
		switch {
		case op.F == histories.Acquire && op.Type == histories.Invoke:
			waiting[op.Process] = true
		case op.F == histories.Acquire && op.Type == histories.OK:
			delete(waiting, op.Process)
			holding[op.Process] = true
		case op.F == histories.Acquire:
			delete(waiting, op.Process)
			if len(holding) > 0 && len(waiting) > 0 {
				n++
			}
		case op.F == histories.Release && op.Type == histories.Invoke:
			delete(holding, op.Process)
		}
	}
	return n
}

// zk-session-expiry: the resource is damaged unfenced, safe fenced. One
// run, unfenced, on a real ensemble: it shows the damage, and its history
// what the fenced run showed of ZooKeeper: the paused holder's late write
// was sent with a lower token (its znode's creation zxid) than a write
// the resource had already accepted, a write a fenced resource rejects by
// its own logic (package resource's tests). The fenced run, a second
// ensemble (10 s of CPU), asserted no more of ZooKeeper; a ZooKeeper lock
// and the fenced resource staying safe under pauses is testZooKeeperRun's
// (fenced, the default).
func testZooKeeperSessionExpiry(t *testing.T) {
	zkserver.ForTest(t)
	out := t.TempDir()
	code, stdout, stderr := cliRun(t, "scenario", "run", "zk-session-expiry", "--resource", "unfenced", "--seed", "3", "--out", out)
	if code != 0 || !strings.Contains(stdout, "scenario zk-session-expiry: as expected") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	ops, err := histories.ReadFile(filepath.Join(firstRunDir(out), "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(staleWrites(ops)) == 0 {
		t.Errorf("no write sent with a lower token than one the resource had accepted: a fenced resource would have rejected none\nstdout:\n%s", stdout)
	}
}

// staleWrites returns the tokens of the writes sent with a lower token
// than a write to their key already accepted (ok): those a fenced
// resource rejects, whatever their outcome here.
func staleWrites(ops []histories.Op) []int64 {
	accepted := map[string]int64{} // by key, the highest token accepted so far
	var stale []int64
	for _, op := range ops {
		tok, ok := op.Token()
		if op.F != histories.Write || !ok {
			continue
		}
		switch op.Type {
		case histories.Invoke:
			if tok < accepted[op.Key] {
				stale = append(stale, tok)
			}
		case histories.OK:
			accepted[op.Key] = max(accepted[op.Key], tok)
		}
	}
	return stale
}

// zk-ghost-node: the holder's next create is applied by the servers and
// its reply lost. zk-unprotected creates again and leaves the first znode,
// never granted, owned by its live session, which stalls the queue until
// that session ends (liveness invalid); zk-lock finds its znode again by
// its protected name and leaves none behind (liveness valid). Each is what
// the scenario expects of its recipe: exit 0. A run whose fault found no
// holder to strike says it did not stage the ghost (exit 2), and is
// skipped.
func testZooKeeperGhostNode(t *testing.T) {
	zkserver.ForTest(t)
	for _, c := range []struct {
		recipe string
		ghost  bool
	}{{"zk-unprotected", true}, {"zk-lock", false}} {
		t.Run(c.recipe, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			code, stdout, stderr := cliRun(t, "scenario", "run", "zk-ghost-node", "--recipe", c.recipe, "--seed", "1", "--out", out)
			if code == 2 && c.ghost && strings.Contains(stdout, "did not stage") {
				// No client held the lock while the fault could strike
				// (a loaded machine's first grant came seconds late):
				// unknown, said so; the ghost is demanded of a staged run.
				t.Skipf("not staged: %s", stdout)
			}
			if code != 0 {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			ops, err := histories.ReadFile(filepath.Join(firstRunDir(out), "history.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var struck string
			granted := map[string]bool{}
			for _, op := range ops {
				switch {
				case op.F == histories.FStop && op.Value.Fault == nemesis.LostReplyAcquire:
					if op.Value.Params["reply"] != "lost" {
						t.Errorf("the fault's stop: %v, want reply=lost", op.Value.Params)
					}
					struck = op.Value.Targets[0]
				case op.F == histories.Acquire && op.Type == histories.OK && op.Value != nil && op.Value.Token != nil:
					granted[strconv.FormatInt(*op.Value.Token, 10)] = true
				}
			}
			if struck == "" {
				if sc := readResults(t, out).Scenario; sc != nil && sc.Unstaged != "" {
					// zk-lock's valid verdict is as expected either way,
					// but a run that struck nothing tests no ghost's
					// absence (the fault found its moment too late).
					t.Skipf("not staged: %s", sc.Unstaged)
				}
				t.Fatal("no lost-reply-acquire fault stopped")
			}
			// The ghost: a znode of the struck client the servers
			// created, never granted, deleted only when its session
			// ended.
			var ghosts []string
			for _, op := range ops {
				if op.F != histories.FKeyDeleted || len(op.Value.Targets) == 0 || op.Value.Targets[0] != struck {
					continue
				}
				p := op.Value.Params
				if p["by"] == histories.DeletedByRevoke && !granted[p["create_revision"]] {
					ghosts = append(ghosts, p["node"])
				}
			}
			if (len(ghosts) > 0) != c.ghost {
				t.Errorf("%s's znodes never granted and deleted only with its session: %v; want a ghost: %v\nstdout:\n%s", struck, ghosts, c.ghost, stdout)
			}
		})
	}
}
