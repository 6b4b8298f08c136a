package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/proc"
)

func readResults(t *testing.T, out string) *harness.Results {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(out, "*", "results.json"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("results: %v, %v", dirs, err)
	}
	b, err := os.ReadFile(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	var res harness.Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// testRunProcessCluster runs members as processes of the built-in etcd,
// with member faults (that none outlives the run, TestRuns checks).
func testRunProcessCluster(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runMain(t, "run", "--cluster", "process", "--nemesis", "pause,crash,partition", "--time", "6s",
		"--quiet", "3s", "--seed", "3", "--out", out)
	if code != exitValid {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "member processes ready in") {
		t.Errorf("stdout does not say the members are processes:\n%s", stdout)
	}
	res := readResults(t, out)
	if res.Run == nil || !strings.Contains(res.Run.System, "member processes") || res.Run.Version == "" {
		t.Fatalf("results do not name the system and its version: %+v", res.Run)
	}
	for _, c := range res.Checks {
		if c.Name == histories.CheckConsistency && c.Verdict != "valid" {
			t.Errorf("consistency %s: %v", c.Verdict, c.Explanation)
		}
	}
}

// TestEtcd11456 finds etcd#11456 in Debian's etcd 3.4 (when installed) and
// not in the built-in etcd. Its two runs, the longest of the end-to-end
// ones (about 28 s each), go beside the others in a process of their own,
// started before the wait for a turn among the others (alone): as
// a subtest whose subtests each waited for a turn, the second often
// started last and ended the package 25 s after the others.
func TestEtcd11456(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios on real servers")
	}
	partest.Own(t, "TestRuns/each/Etcd11456")
	if _, err := os.Stat("/usr/bin/etcd"); err != nil {
		t.Skipf("skipped: /usr/bin/etcd not installed (apt-get install etcd-server): %v", err)
	}
	// The two runs side by side: each mostly waits out its sections.
	t.Run("3.4", func(t *testing.T) {
		t.Parallel()
		out := t.TempDir()
		code, stdout, stderr := runMain(t, "scenario", "run", "etcd-11456", "--seed", "1", "--out", out)
		if code != exitValid || !strings.Contains(stdout, "scenario etcd-11456: as expected") ||
			!strings.Contains(stdout, "it was granted a lock whose key was already gone") {
			t.Fatalf("etcd 3.4: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if res := readResults(t, out); !strings.HasPrefix(res.Run.Version, "3.4.") {
			t.Errorf("etcd version %q, want 3.4", res.Run.Version)
		}
	})
	// The built-in etcd has the fix: contract valid, not the bug the
	// scenario expects, and a scenario exits on its expectations.
	t.Run("built-in", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runMain(t, "scenario", "run", "etcd-11456", "--etcd-bin=", "--seed", "1", "--out", t.TempDir())
		if code != exitInvalid || !strings.Contains(stdout, "contract    valid") || !strings.Contains(stdout, "scenario etcd-11456: NOT as expected: contract is valid, expected invalid") {
			t.Fatalf("built-in etcd: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
}

// testRunExternal runs against "someone else's cluster": a process cluster
// this test starts and hands over by its client URLs only.
func testRunExternal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{Processes: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var urls []string
	for _, m := range c.Members() {
		urls = append(urls, m.ClientURL)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's keys, one beside where locktest's will go.
	for _, k := range []string{"/app/config", "/locktest/other-run/x", "/locktestx"} {
		if _, err := admin.Put(ctx, k, "theirs"); err != nil {
			t.Fatal(err)
		}
	}
	before, err := admin.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	eps := strings.Join(urls, ",")

	// Member faults are refused before anything starts.
	code, _, stderr := runMain(t, "run", "--cluster", "external", "--endpoints", eps, "--nemesis", "partition", "--out", out)
	if code != exitUnknown || !strings.Contains(stderr, "--cluster process or --cluster embedded") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Fatalf("--nemesis partition: exit %d, stderr %q", code, stderr)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("a refused run left %v", ents)
	}

	code, stdout, stderr := runMain(t, "run", "--cluster", "external", "--endpoints", eps, "--nemesis", "pause,lease,isolate",
		"--time", "8s", "--quiet", "3s", "--seed", "2", "--out", out)
	if code != exitValid || !strings.Contains(stdout, "external cluster of 3 members") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := readResults(t, out)
	if res.Run.Nemesis == nil || len(res.Run.Nemesis.Faults) == 0 {
		t.Fatalf("no client fault ran: %+v", res.Run.Nemesis)
	}
	for _, f := range res.Run.Nemesis.Faults {
		if strings.HasSuffix(f.Fault, "-member") || strings.HasPrefix(f.Fault, "partition") {
			t.Errorf("a member fault ran against an external cluster: %s", f.Fault)
		}
	}
	after, err := admin.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Kvs) != len(before.Kvs) {
		t.Fatalf("%d keys before the run, %d after: %v", len(before.Kvs), len(after.Kvs), after.Kvs)
	}
	for i, kv := range after.Kvs {
		b := before.Kvs[i]
		if string(kv.Key) != string(b.Key) || string(kv.Value) != string(b.Value) || kv.ModRevision != b.ModRevision {
			t.Errorf("key %s changed: %s@%d, was %s@%d", kv.Key, kv.Value, kv.ModRevision, b.Value, b.ModRevision)
		}
	}
}

// testStoppedProcessRun stops a locktest run with member processes part way,
// by Ctrl-C (SIGINT): no member outlives it, it exits with status 2, and
// the history recorded so far is on disk and checkable. (Stopped by
// SIGKILL, the same: testKilledRuns's process case.)
func testStoppedProcessRun(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRuns$")
	cmd.Env = append(os.Environ(), "LOCKTEST_CLI_ARGS=run --cluster process --nemesis pause --time 30s --seed 4 --out "+out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var members []int
	if !eventually(t, 20*time.Second, func() bool {
		members = proc.Children(cmd.Process.Pid)
		h, err := os.Stat(filepath.Join(firstRunDir(out), "history.jsonl"))
		return len(members) == 3 && err == nil && h.Size() > 1000
	}) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the run did not get going: members %v", members)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUnknown {
		t.Errorf("interrupted run exited with %v, want status 2", err)
	}
	if !eventually(t, 10*time.Second, func() bool {
		return !slices.ContainsFunc(members, proc.Alive)
	}) {
		t.Fatalf("member processes %v outlived an interrupted locktest", members)
	}
	code, stdout, stderr := runMain(t, "check", filepath.Join(firstRunDir(out), "history.jsonl"))
	if !strings.Contains(stdout, "verdict: ") || strings.Contains(stderr, "history.jsonl:") {
		t.Fatalf("the history left by the interrupted run is not checkable: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("interrupted: members %v gone; check of the history: exit %d, %s", members, code,
		strings.SplitN(stdout[strings.Index(stdout, "verdict: "):], "\n", 2)[0])
}

// firstRunDir is the one run directory under out ("" while there is none).
func firstRunDir(out string) string {
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if e.IsDir() {
			return filepath.Join(out, e.Name())
		}
	}
	return ""
}
