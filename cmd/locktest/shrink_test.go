package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/redisserver"
)

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
// kept, and checks that it kept only that run.
func shrunkResults(t *testing.T, dir, stdout string) harness.Results {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(dir, shrinkDir, "*"))
	if len(runs) != 1 || !strings.Contains(stdout, "best reproduction: "+relPath(runs[0])) {
		t.Fatalf("runs kept %v, want the one best reproduction named in:\n%s", runs, stdout)
	}
	for _, f := range []string{"history.jsonl", "results.json", "report.html", "schedule.json"} {
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

func readSchedule(t *testing.T, path string) nemesis.Schedule {
	t.Helper()
	s, err := nemesis.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A real failing run shrunk end to end: three pauses of the holder before
// its write, longer than its lease, against an unfenced resource; the
// first already damages the data. Shrinking keeps one pause, writes the
// schedule and the best reproduction, whose report says what was removed,
// and the replay command it prints fails again.
func TestShrinkEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("replays real runs")
	}
	pause := func(at time.Duration) nemesis.Entry {
		return nemesis.Entry{At: at, Fault: nemesis.PauseClient, Target: nemesis.TargetHolder, Fallback: "c0", Duration: 3 * time.Second,
			Params: map[string]string{"before_write": "true"}}
	}
	s := nemesis.Schedule{Seed: 1, Members: 3, Clients: []string{"c0", "c1", "c2"},
		Entries: []nemesis.Entry{pause(time.Second), pause(4500 * time.Millisecond), pause(8 * time.Second)}}
	dir := failingRun(t, s, "--resource", "unfenced", "--nemesis", "pause", "--time", "11s", "--quiet", "1s", "--clients", "3",
		"--slow-share", "0", "--seed", "1")
	socks := sockets(t)

	code, stdout, stderr := runMain(t, "shrink", dir, "--replays", "1", "--steps", "faults,time", "--budget", "3m")
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1 (the failure reproduced)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "3 faults over 11 s → 1 fault (pause-client c") || !strings.Contains(stdout, "; reproduced 1 of 1") {
		t.Errorf("no one-line summary of what was shrunk:\n%s", stdout)
	}
	if !strings.Contains(stderr, "shrink   1 ") || !strings.Contains(stderr, "reproduced in 1 of 1: kept") {
		t.Errorf("no progress line per candidate on stderr:\n%s", stderr)
	}
	shrunk := readSchedule(t, filepath.Join(dir, shrunkSchedule))
	if len(shrunk.Entries) != 1 || shrunk.Entries[0].Fault != nemesis.PauseClient {
		t.Errorf("shrunk schedule %+v, want one pause", shrunk.Entries)
	}
	res := shrunkResults(t, dir, stdout)
	if res.Shrunk == nil || len(res.Shrunk.Removed) != 2 || res.Shrunk.From != dir || res.Shrunk.Failure != "resource" {
		t.Errorf("the best reproduction does not say what was removed: %+v", res.Shrunk)
	}
	if res.Verdict != "invalid" {
		t.Errorf("the best reproduction is %s", res.Verdict)
	}
	if !eventually(t, 5*time.Second, func() bool { return sockets(t) <= socks }) {
		t.Errorf("sockets left open: %d, were %d", sockets(t), socks)
	}

	// The printed command replays the shrunk schedule, and fails again.
	i := strings.Index(stdout, "replay: locktest run ")
	if i < 0 {
		t.Fatalf("no replay command:\n%s", stdout)
	}
	replay := strings.Fields(strings.SplitN(stdout[i+len("replay: locktest "):], "\n", 2)[0])
	if !slices.Contains(replay, filepath.Join(dir, shrunkSchedule)) {
		t.Errorf("the replay command does not use the shrunk schedule: %v", replay)
	}
	code, out, _ := runMain(t, append(replay, "--out", t.TempDir())...)
	if code != exitInvalid {
		t.Errorf("the replay command exits %d, want 1:\n%s", code, out)
	}
}

// Kleppmann's Redlock counterexample needs two faults, as the nemesis
// stages it: two of five masters paused until a client is granted the lock
// on the other three, then one of those three crashed (restarted empty), so
// that another client is granted three of five. Shrinking drops the fault
// before them and keeps both: the pause alone does not fail, and the crash
// is never tried without the pause that stages it.
func TestShrinkKeepsTwoFaultsBothNeeded(t *testing.T) {
	if testing.Short() {
		t.Skip("replays real runs")
	}
	redisserver.ForTest(t)
	s := nemesis.Schedule{Seed: 1, Members: 5, Clients: []string{"c0", "c1", "c2"}, Entries: []nemesis.Entry{
		{At: 200 * time.Millisecond, Fault: nemesis.PauseClient, Target: "c1", Duration: 300 * time.Millisecond},
		{At: time.Second, Fault: nemesis.PauseMember, Target: "r3", Duration: 3 * time.Second, Params: map[string]string{"with": "r4", "until": "grant"}},
		{At: time.Second, Fault: nemesis.CrashMember, Target: "r2", Duration: 300 * time.Millisecond},
	}}
	dir := failingRun(t, s, "--recipe", "redlock", "--require", "mutex", "--nemesis", "pause,crash", "--time", "7s", "--quiet", "1s",
		"--clients", "3", "--think-min", "3s", "--think", "3s", "--seed", "1")

	code, stdout, stderr := runMain(t, "shrink", dir, "--replays", "1", "--steps", "faults", "--budget", "3m")
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1", code)
	}
	shrunk := readSchedule(t, filepath.Join(dir, shrunkSchedule))
	var kinds []string
	for _, e := range shrunk.Entries {
		kinds = append(kinds, e.Fault)
	}
	if !slices.Equal(kinds, []string{nemesis.PauseMember, nemesis.CrashMember}) || !shrunk.StagesNext(0) {
		t.Fatalf("kept %v, want the staged pause of two masters and the crash", kinds)
	}
	i := strings.Index(stderr, ": 1 fault (pause-member) over")
	if i < 0 || !strings.Contains(strings.SplitN(stderr[i:], "\n", 2)[0], "not reproduced") {
		t.Errorf("the pause was not tried alone, or reproduced alone")
	}
	if strings.Contains(stderr, "1 fault (crash-member)") {
		t.Errorf("the crash was tried without the pause that stages it")
	}
	if res := shrunkResults(t, dir, stdout); res.Shrunk == nil || len(res.Shrunk.Removed) != 1 {
		t.Errorf("the best reproduction does not say what was removed: %+v", res.Shrunk)
	}
	if !eventually(t, 5*time.Second, func() bool { return len(proc.Children(os.Getpid())) == 0 }) {
		t.Errorf("processes outlived the search: %v", proc.Children(os.Getpid()))
	}
}
