package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/shrink"
)

// fakeSystem stands in for the servers in the tests of the CLI's shrink
// (its loading, its replays' options, what it prints and writes): it
// checks no lock, it says for the schedule a run plays whether the run
// fails its check and when. Each entry strikes at its time for its
// duration, as the history and the nemesis report say; a run fails when
// needs names the entries its failure needs, the violation complete lag
// after the last of them began and blamed on them, within the run's time.
type fakeSystem struct {
	t     *testing.T
	check string
	needs func(s nemesis.Schedule) []int
	lag   time.Duration
	// runs are the options of every run played, the original's first.
	runs []harness.Options
}

// run plays o and writes its run directory as harness.Run does: history,
// results (recording the command that reproduces it, as Plan.Run does) and schedule.
func (f *fakeSystem) run(o harness.Options) *harness.Results {
	f.t.Helper()
	f.runs = append(f.runs, o)
	s := *o.Schedule
	res := &harness.Results{History: filepath.Join(o.Dir, "history.jsonl"), Required: []string{f.check}, Shrunk: o.Shrunk,
		Run: &harness.RunStats{Nemesis: &nemesis.Report{}}, Verdict: checker.Valid, Exit: exitValid}
	res.Args, res.Command = harness.Reproduce(o)
	var h bytes.Buffer
	w := histories.NewWriter(&h)
	for i, e := range s.Entries {
		target := e.Target
		if target == nemesis.TargetHolder {
			target = e.Fallback
		}
		res.Run.Nemesis.Faults = append(res.Run.Nemesis.Faults,
			nemesis.Fired{Entry: i, Fault: e.Fault, Targets: []string{target}, Start: e.At, Stop: e.At + e.Duration})
		// The starts come first: a start's index is its entry's.
		if _, err := w.Write(histories.Op{Type: histories.Info, F: histories.FStart, Process: histories.Nemesis, Time: int64(e.At),
			Value: &histories.Value{Fault: e.Fault, Targets: []string{target}}}); err != nil {
			f.t.Fatal(err)
		}
	}
	if _, err := w.Write(histories.Op{Type: histories.Info, F: histories.FHeal, Process: histories.Nemesis, Time: int64(o.Time)}); err != nil {
		f.t.Fatal(err)
	}
	check := checker.Result{Name: f.check, Verdict: checker.Valid}
	if need := f.needs(s); need != nil {
		v := checker.Violation{Check: f.check, Kind: "stale-write"}
		for _, i := range need {
			v.To = max(v.To, int64(s.Entries[i].At+f.lag))
			v.Faults = append(v.Faults, checker.Fault{Fault: s.Entries[i].Fault, Index: i})
		}
		if v.To <= int64(o.Time) {
			check = checker.Result{Name: f.check, Verdict: checker.Invalid, Violations: []checker.Violation{v}}
			res.Verdict, res.Exit = checker.Invalid, exitInvalid
		}
	}
	res.Checks = []checker.Result{check}
	if err := os.WriteFile(res.History, h.Bytes(), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := res.WriteFile(filepath.Join(o.Dir, "results.json")); err != nil {
		f.t.Fatal(err)
	}
	if err := s.WriteFile(filepath.Join(o.Dir, "schedule.json")); err != nil {
		f.t.Fatal(err)
	}
	return res
}

// fakeRunFiles are the files of a run's directory on the fake: no report
// (a report draws from a history checked for real).
var fakeRunFiles = []string{"history.jsonl", "results.json", "schedule.json"}

// replay is the fake's harness.Run, for shrink.Settings.Replay.
func (f *fakeSystem) replay(_ context.Context, o harness.Options) (*harness.Results, error) {
	return f.run(o), nil
}

// runOptions parses a run command's words (after "run") as locktest run does.
func runOptions(t *testing.T, args []string) harness.Options {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rf := addRunFlags(fs, ownBackends)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o, err := rf.options()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// failed plays s on the fake as locktest run with args would, and returns
// the run directory, which must have failed.
func (f *fakeSystem) failed(s nemesis.Schedule, args ...string) string {
	f.t.Helper()
	o := runOptions(f.t, args)
	o.Dir, o.Schedule = filepath.Join(f.t.TempDir(), "run"), &s
	if err := os.Mkdir(o.Dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if res := f.run(o); res.Exit != exitInvalid {
		f.t.Fatalf("the run to shrink did not fail: %+v", res.Checks)
	}
	return o.Dir
}

// shrinkFake shrinks the run in dir on the fake, as locktest shrink does;
// stderr, if set, hears the progress lines.
func (f *fakeSystem) shrink(ctx context.Context, dir string, set shrink.Settings, stderr io.Writer) (int, string) {
	f.t.Helper()
	run, args, done, err := loadShrinkRun(ownBackends, dir, "")
	if err != nil || done != "" {
		f.t.Fatalf("loading %s: %v %s", dir, err, done)
	}
	if stderr == nil {
		stderr = io.Discard
	}
	set.Replay = f.replay
	var out bytes.Buffer
	code, err := shrinkRun(ctx, run, args, set, &out, stderr)
	if err != nil {
		f.t.Fatalf("shrink: %v\n%s", err, out.String())
	}
	return code, out.String()
}

// The shrink of TestShrinkEndToEnd, on the fake: three pauses of the
// holder, the first of which already fails the run. Ctrl-C once the first
// candidate is judged keeps it, the best so far, without replaying it
// again; a whole shrink (faults and times) keeps one pause, says so in a
// line, reports each candidate, keeps only the best reproduction, which
// records what was removed, and prints the command that replays it: the
// options of that reproduction, with the shrunk schedule.
func TestShrinkOnAFakeSystem(t *testing.T) {
	pause := func(at time.Duration) nemesis.Entry {
		return nemesis.Entry{At: at, Fault: nemesis.PauseClient, Target: nemesis.TargetHolder, Fallback: "c0", Duration: 3 * time.Second,
			Params: map[string]string{"before_write": "true"}}
	}
	s := nemesis.Schedule{Seed: 1, Members: 3, Clients: []string{"c0", "c1", "c2"},
		Entries: []nemesis.Entry{pause(time.Second), pause(4500 * time.Millisecond), pause(8 * time.Second)}}
	f := &fakeSystem{t: t, check: histories.CheckResource, lag: 2 * time.Second, needs: func(s nemesis.Schedule) []int {
		if len(s.Entries) == 0 {
			return nil
		}
		return []int{0}
	}}
	dir := f.failed(s, "--resource", "unfenced", "--nemesis", "pause", "--time", "11s", "--quiet", "1s", "--clients", "3",
		"--slow-share", "0", "--seed", "1")

	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	code, out := f.shrink(ctx, dir, shrink.Settings{Replays: 1, Budget: 3 * time.Minute, Steps: shrink.AllSteps}, onWrite(func(line string) {
		if strings.HasPrefix(line, "shrink   1 ") {
			interrupt()
		}
	}))
	if code != exitUnknown || !strings.Contains(out, "interrupted: the best found so far, not replayed again") {
		t.Errorf("interrupted: exit %d; want 2 and a summary saying so:\n%s", code, out)
	}
	if got := readSchedule(t, filepath.Join(dir, shrink.ScheduleFile)); len(got.Entries) != 1 {
		t.Errorf("the best so far (the faults before the failure: one pause) was not kept: %+v", got.Entries)
	}

	f.runs = nil
	var stderr bytes.Buffer
	code, stdout := f.shrink(context.Background(), dir, shrink.Settings{Replays: 1, Budget: 3 * time.Minute,
		Steps: shrink.Steps{Faults: true, Time: true}}, &stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1 (the failure reproduced)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr.String())
	}
	if !strings.Contains(stdout, "3 faults over 11 s → 1 fault (pause-client c0") || !strings.Contains(stdout, "; reproduced 1 of 1") {
		t.Errorf("no one-line summary of what was shrunk:\n%s", stdout)
	}
	if !strings.Contains(stderr.String(), "shrink   1 ") || !strings.Contains(stderr.String(), "reproduced in 1 of 1: kept") {
		t.Errorf("no progress line per candidate on stderr:\n%s", stderr.String())
	}
	shrunk := readSchedule(t, filepath.Join(dir, shrink.ScheduleFile))
	if len(shrunk.Entries) != 1 || shrunk.Entries[0].Fault != nemesis.PauseClient {
		t.Errorf("shrunk schedule %+v, want one pause", shrunk.Entries)
	}
	res := shrunkResults(t, dir, stdout, fakeRunFiles...)
	if res.Shrunk == nil || len(res.Shrunk.Removed) != 2 || res.Shrunk.From != dir || res.Shrunk.Failure != "resource" {
		t.Errorf("the best reproduction does not say what was removed: %+v", res.Shrunk)
	}

	// The printed command is the best reproduction's, with the shrunk
	// schedule: the same words once parsed, and the same schedule.
	i := strings.Index(stdout, "replay: locktest run ")
	if i < 0 {
		t.Fatalf("no replay command:\n%s", stdout)
	}
	replay, err := shellwords.Split(strings.SplitN(stdout[i+len("replay: locktest run "):], "\n", 2)[0])
	if err != nil || !slices.Contains(replay, filepath.Join(dir, shrink.ScheduleFile)) {
		t.Fatalf("the replay command does not use the shrunk schedule: %v (%v)", replay, err)
	}
	kept := slices.IndexFunc(f.runs, func(o harness.Options) bool { return strings.HasPrefix(res.History, o.Dir+string(filepath.Separator)) })
	if kept < 0 {
		t.Fatalf("the best reproduction %s is none of the replays", res.History)
	}
	best, again := f.runs[kept], runOptions(t, replay)
	again.Dir = best.Dir
	if got, want := mustReproduce(again), res.Args; !slices.Equal(got, want) {
		t.Errorf("the replay command runs\n%q\nthe best reproduction ran\n%q", got, want)
	}
	if again.Schedule == nil || !reflect.DeepEqual(*again.Schedule, *best.Schedule) {
		t.Errorf("the replay command's schedule %+v, the best reproduction's %+v", again.Schedule, best.Schedule)
	}
}

// mustReproduce is harness.Reproduce's words for o.
func mustReproduce(o harness.Options) []string {
	args, _ := harness.Reproduce(o)
	return args
}

// Kleppmann's Redlock counterexample needs two faults, as the nemesis
// stages it (on real servers: TestRuns/RedlockBareQuorum): two masters
// paused until a grant, then one of the other three crashed. Shrinking
// drops the fault before them and keeps both: the pause alone is tried and
// does not fail, the crash is never tried without the pause that stages it.
func TestShrinkKeepsTwoFaultsOnAFakeSystem(t *testing.T) {
	s := nemesis.Schedule{Seed: 1, Members: 5, Clients: []string{"c0", "c1"}, Entries: []nemesis.Entry{
		{At: 200 * time.Millisecond, Fault: nemesis.PauseClient, Target: "c1", Duration: 300 * time.Millisecond},
		{At: time.Second, Fault: nemesis.PauseMember, Target: "r3", Duration: 10 * time.Second,
			Params: map[string]string{"with": "r4", "until": "grant", "ahead": "6s-"}},
		{At: time.Second, Fault: nemesis.CrashMember, Target: "r2", Duration: 300 * time.Millisecond},
	}}
	f := &fakeSystem{t: t, check: histories.CheckMutex, lag: 7 * time.Second, needs: func(s nemesis.Schedule) []int {
		pause := slices.IndexFunc(s.Entries, func(e nemesis.Entry) bool { return e.Fault == nemesis.PauseMember })
		crash := slices.IndexFunc(s.Entries, func(e nemesis.Entry) bool { return e.Fault == nemesis.CrashMember })
		if crash >= 0 && pause < 0 {
			t.Errorf("the crash was tried without the pause that stages it: %+v", s.Entries)
		}
		if pause < 0 || crash < 0 {
			return nil
		}
		return []int{pause, crash}
	}}
	dir := f.failed(s, "--recipe", "redlock", "--require", "mutex", "--nemesis", "pause,crash", "--time", "11s", "--quiet", "1s",
		"--clients", "2", "--ttl", "3", "--think-min", "500ms", "--think", "800ms", "--slow-share", "0.5", "--slow-think", "8s-8s",
		"--op-timeout", "3s", "--seed", "83")

	var stderr bytes.Buffer
	code, stdout := f.shrink(context.Background(), dir, shrink.Settings{Replays: 1, Budget: 3 * time.Minute, Steps: shrink.Steps{Faults: true}}, &stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr.String())
	}
	shrunk := readSchedule(t, filepath.Join(dir, shrink.ScheduleFile))
	var kinds []string
	for _, e := range shrunk.Entries {
		kinds = append(kinds, e.Fault)
	}
	if !slices.Equal(kinds, []string{nemesis.PauseMember, nemesis.CrashMember}) || !shrunk.StagesNext(0) {
		t.Fatalf("kept %v, want the staged pause of two masters and the crash", kinds)
	}
	i := strings.Index(stderr.String(), ": 1 fault (pause-member) over")
	if i < 0 || !strings.Contains(strings.SplitN(stderr.String()[i:], "\n", 2)[0], "not reproduced") {
		t.Errorf("the pause was not tried alone, or reproduced alone:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "1 fault (crash-member)") {
		t.Errorf("the crash was tried without the pause that stages it:\n%s", stderr.String())
	}
	if res := shrunkResults(t, dir, stdout, fakeRunFiles...); res.Shrunk == nil || len(res.Shrunk.Removed) != 1 {
		t.Errorf("the best reproduction does not say what was removed: %+v", res.Shrunk)
	}
}
