package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/shrink"
)

// onWrite is a writer that hands each line written to it to f.
type onWrite func(line string)

func (f onWrite) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f(line)
	}
	return len(b), nil
}

// failingRun runs locktest with a hand-written schedule and the flags
// given, and returns the run directory of a run that failed.
func failingRun(t *testing.T, s nemesis.Schedule, args ...string) string {
	t.Helper()
	tmp := t.TempDir()
	sched, out := filepath.Join(tmp, "schedule.json"), filepath.Join(tmp, "runs")
	if err := s.WriteFile(sched); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain(t, append([]string{"run", "--schedule", sched, "--out", out}, args...)...)
	if code != exitInvalid {
		t.Fatalf("the run to shrink did not fail: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v", dirs)
	}
	if !strings.Contains(stdout, "shrink: locktest shrink "+relPath(dirs[0])) {
		t.Errorf("a failed run does not name the command that shrinks it:\n%s", stdout)
	}
	return dirs[0]
}

// shrunkResults reads the results of the best reproduction that shrink
// kept, and checks that it kept only that run, with files.
func shrunkResults(t *testing.T, dir, stdout string, files ...string) harness.Results {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(dir, shrink.WorkDir, "*"))
	if len(runs) != 1 || !strings.Contains(stdout, "best reproduction: "+relPath(runs[0])) {
		t.Fatalf("runs kept %v, want the one best reproduction named in:\n%s", runs, stdout)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(runs[0], f)); err != nil {
			t.Errorf("the best reproduction lacks %s: %v", f, err)
		}
	}
	var res harness.Results
	b, err := os.ReadFile(filepath.Join(runs[0], "results.json"))
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runFiles are the files of a run's directory on real servers.
var runFiles = []string{"history.jsonl", "results.json", "report.html", "schedule.json"}

func readSchedule(t *testing.T, path string) nemesis.Schedule {
	t.Helper()
	s, err := nemesis.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A real failing run shrunk end to end on real servers: three pauses of
// the holder before its write, longer than its lease, against an unfenced
// resource; the first already damages the data. Shrinking its faults
// keeps one pause, writes the schedule and the best reproduction (its
// report among its files), which fails again and says what was removed,
// and leaves no socket open. What the CLI does around the replays (Ctrl-C,
// the time step, the replay command's words) is TestShrinkOnAFakeSystem's.
func TestShrinkEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("replays real runs")
	}
	partest.Own(t, "TestRuns/each/ShrinkEndToEnd")
	pause := func(at time.Duration) nemesis.Entry {
		// Longer than the 2 TTLs the nemesis draws at most: at load 24-43
		// the next grant came 1.8-3.6 s after the strike (the lease's
		// TTL, etcd's expiry check every 500 ms, the revoke, the
		// waiter's watch; 3.6 s where the run's process stalled for
		// 0.7-0.9 s four times), and a 3 s pause, over before it at
		// load 55-68, made the shrink's final replay hold: exit 2.
		return nemesis.Entry{At: at, Fault: nemesis.PauseClient, Target: nemesis.TargetHolder, Fallback: "c0", Duration: 5 * time.Second,
			Params: map[string]string{"before_write": "true"}}
	}
	s := nemesis.Schedule{Seed: 1, Members: 3, Clients: []string{"c0", "c1", "c2"},
		Entries: []nemesis.Entry{pause(time.Second), pause(7 * time.Second), pause(13 * time.Second)}}
	dir := failingRun(t, s, "--resource", "unfenced", "--nemesis", "pause", "--time", "18s", "--quiet", "1s", "--clients", "3",
		"--slow-share", "0", "--seed", "1")
	socks := sockets(t)

	code, stdout, stderr := runMain(t, "shrink", dir, "--replays", "1", "--steps", "faults", "--budget", "3m")
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1 (the failure reproduced)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "3 faults over 18 s → 1 fault (pause-client c") || !strings.Contains(stdout, "; reproduced 1 of 1") {
		t.Errorf("no one-line summary of what was shrunk:\n%s", stdout)
	}
	if !strings.Contains(stderr, "shrink   1 ") || !strings.Contains(stderr, "reproduced in 1 of 1: kept") {
		t.Errorf("no progress line per candidate on stderr:\n%s", stderr)
	}
	shrunk := readSchedule(t, filepath.Join(dir, shrink.ScheduleFile))
	if len(shrunk.Entries) != 1 || shrunk.Entries[0].Fault != nemesis.PauseClient {
		t.Errorf("shrunk schedule %+v, want one pause", shrunk.Entries)
	}
	res := shrunkResults(t, dir, stdout, runFiles...)
	if res.Shrunk == nil || len(res.Shrunk.Removed) != 2 || res.Shrunk.From != dir || res.Shrunk.Failure != "resource" {
		t.Errorf("the best reproduction does not say what was removed: %+v", res.Shrunk)
	}
	if res.Verdict != "invalid" {
		t.Errorf("the best reproduction is %s", res.Verdict)
	}
	if !eventually(t, 5*time.Second, func() bool { return sockets(t) <= socks }) {
		t.Errorf("sockets left open: %d, were %d", sockets(t), socks)
	}
}

// Bad input gets one line and exit 2, a run with nothing to shrink exit 0,
// and a schedule whose runs no longer fail is told apart (after replaying
// it) with nothing left behind. The CLI's own logic: its runs and replay
// are on the fake backend (a real shrink: TestShrinkEndToEnd).
func TestShrinkBadInput(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runOnFake(t, "run", "--time", "1s", "--quiet", "100ms", "--nemesis", "pause", "--nemesis-interval", "200ms",
		"--fault-durations", "pause=200ms", "--clients", "2", "--slow-share", "0", "--seed", "3", "--out", out)
	if code != exitValid {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*"))
	passed := dirs[0]
	if strings.Contains(stdout, "locktest shrink") {
		t.Errorf("a run that held names a shrink command:\n%s", stdout)
	}

	// A directory that is no run, a run without a schedule, a scenario's.
	empty := t.TempDir()
	noSchedule := filepath.Join(t.TempDir(), "run")
	scenarioRun := filepath.Join(t.TempDir(), "run")
	failed := harness.Results{Checks: []checker.Result{{Name: "resource", Verdict: checker.Invalid}}, Required: []string{"resource"},
		Verdict: checker.Invalid, Exit: exitInvalid, Command: "locktest run --seed 1"}
	withScenario := failed
	withScenario.Scenario, withScenario.Command = &harness.Scenario{Name: "paused-holder"}, "locktest scenario run paused-holder --seed 1"
	for dir, res := range map[string]harness.Results{noSchedule: failed, scenarioRun: withScenario} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := res.WriteFile(filepath.Join(dir, "results.json")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dir  string
		code int
		out  string
	}{
		{empty, exitUnknown, "no results.json: not a run directory"},
		{noSchedule, exitUnknown, "has no schedule.json"},
		{passed, exitValid, "passed (verdict valid): nothing to shrink"},
		{scenarioRun, exitValid, "scenario paused-holder: its scripted schedule is already small"},
	} {
		code, stdout, stderr := runOnFake(t, "shrink", c.dir)
		if code != c.code || !strings.Contains(stdout+stderr, c.out) || strings.Count(stdout+stderr, "\n") != 1 {
			t.Errorf("shrink %s: exit %d, %q%q; want exit %d and one line saying %q", c.dir, code, stdout, stderr, c.code, c.out)
		}
	}
	if code, _, stderr := runOnFake(t, "shrink"); code != exitUnknown || !strings.Contains(stderr, "want a run directory") {
		t.Errorf("no directory: exit %d, %q", code, stderr)
	}

	// The passing run, with its results saying its first check (mutex)
	// failed: its schedule is replayed, does not fail, and that is said in
	// a line.
	b, err := os.ReadFile(filepath.Join(passed, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"verdict": "valid"`, `"verdict": "invalid"`, 1))
	if err := os.WriteFile(filepath.Join(passed, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	socks := sockets(t)
	code, stdout, stderr = runOnFake(t, "shrink", passed, "--replays", "1", "--check", "mutex")
	if code != exitUnknown || !strings.Contains(stderr, "no longer fails: 1 replay of its schedule did not fail mutex") {
		t.Errorf("exit %d, stderr %q; want 2 and that the schedule no longer fails\nstdout:\n%s", code, stderr, stdout)
	}
	if _, err := os.Stat(filepath.Join(passed, shrink.WorkDir)); !os.IsNotExist(err) {
		t.Errorf("the replays' runs were left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(passed, shrink.ScheduleFile)); !os.IsNotExist(err) {
		t.Errorf("a shrunk schedule was written for a schedule that no longer fails")
	}
	if !eventually(t, 5*time.Second, func() bool { return sockets(t) <= socks }) {
		t.Errorf("sockets left open: %d, were %d", sockets(t), socks)
	}
}

// TestShrinkReplaysTheRecordedWords: an exec: recipe whose command holds a
// quoted space, and a run directory with a space in its path, are replayed
// as the run was given them, from the words results.json records and, for
// a run recorded before it kept them, from its quoted command line.
func TestShrinkReplaysTheRecordedWords(t *testing.T) {
	adapter := filepath.Join(t.TempDir(), "my adapters", "lock.sh")
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	rf := addRunFlags(fs, ownBackends)
	if err := fs.Parse([]string{"--recipe", "exec:sh '" + adapter + "' --ttl-ms 2000", "--backend", "redis", "--resource", "unfenced", "--seed", "5"}); err != nil {
		t.Fatal(err)
	}
	o, err := rf.options()
	if err != nil {
		t.Fatal(err)
	}
	o.Dir = filepath.Join(t.TempDir(), "run dir")
	o.Schedule = &nemesis.Schedule{Seed: 5, Members: 3, Clients: []string{"c1", "c2"}}
	if err := os.Mkdir(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := o.Schedule.WriteFile(filepath.Join(o.Dir, "schedule.json")); err != nil {
		t.Fatal(err)
	}
	args, command := harness.Reproduce(o)
	wantCmd := []string{"sh", adapter, "--ttl-ms", "2000"}
	failed := harness.Results{Checks: []checker.Result{{Name: "resource", Verdict: checker.Invalid}}, Required: []string{"resource"},
		Verdict: checker.Invalid, Exit: exitInvalid}
	for name, rec := range map[string]struct {
		args    []string
		command string
	}{"words": {args, command}, "command line only (older runs)": {nil, command}} {
		res := failed
		res.Args, res.Command = rec.args, rec.command
		args, base, err := recordedCommand(ownBackends, o.Dir, &res, filepath.Join(o.Dir, "schedule.json"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rec, ok := base.Workload.Recipe.(*execlock.Recipe)
		if !ok || !slices.Equal(rec.Command, wantCmd) {
			t.Errorf("%s: replayed recipe %#v, want exec of %q", name, base.Workload.Recipe, wantCmd)
		}
		if base.Backend != "redis" || base.Workload.Seed != 5 {
			t.Errorf("%s: replayed backend %q seed %d, want redis and 5", name, base.Backend, base.Workload.Seed)
		}
		sched := filepath.Join(o.Dir, "shrunk.schedule.json")
		line, err := shellwords.Split(replayCommand(args, shrink.Candidate{}, sched))
		if err != nil || !slices.Contains(line, "exec:sh '"+adapter+"' --ttl-ms 2000") || !slices.Contains(line, sched) {
			t.Errorf("%s: the replay command's words %q (%v) lose the recipe or the schedule's path", name, line, err)
		}
	}
}
