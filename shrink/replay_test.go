package shrink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/nemesis"
)

// failingDir writes a run directory that failed resource under a schedule
// of three pauses, and returns it.
func failingDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	res := harness.Results{Required: []string{"resource"}, Verdict: checker.Invalid, Exit: harness.ExitInvalid,
		History: filepath.Join(dir, "history.jsonl"),
		Checks:  []checker.Result{{Name: "resource", Verdict: checker.Invalid, Violations: []checker.Violation{{Kind: "stale-write"}}}}}
	if err := res.WriteFile(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, res.History)
	var entries []nemesis.Entry
	for i, target := range []string{"c0", "c1", "c2"} {
		entries = append(entries, nemesis.Entry{At: time.Duration(i+1) * time.Second, Fault: nemesis.PauseClient, Target: target, Duration: time.Second})
	}
	s := nemesis.Schedule{Seed: 1, Members: 3, Clients: []string{"c0", "c1", "c2"}, Entries: entries}
	if err := s.WriteFile(filepath.Join(dir, "schedule.json")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeHistory writes a history of one setup event: what Observe reads of
// a replay (its fault events) is none.
func writeHistory(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(`{"index":0,"type":"info","f":"setup","process":"nemesis","time":0}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// load reads dir as a run to shrink, replayed with options of its own.
func load(t *testing.T, dir string) *Run {
	t.Helper()
	r, done, err := Load(dir, "", func(_ *harness.Results, sched string) (harness.Options, error) {
		if !filepath.IsAbs(sched) {
			t.Errorf("the schedule to replay %q is not an absolute path", sched)
		}
		o := harness.Options{Time: 5 * time.Second, Quiet: 2 * time.Second}
		o.Workload.Clients, o.Workload.Seed = 3, 1
		return o, nil
	})
	if err != nil || done != "" {
		t.Fatalf("loading %s: %v %s", dir, err, done)
	}
	return r
}

// fakeReplay is a replay without a system: it fails resource exactly when
// the schedule pauses c1, and counts its replays.
func fakeReplay(t *testing.T, n *int) func(context.Context, harness.Options) (*harness.Results, error) {
	return func(_ context.Context, o harness.Options) (*harness.Results, error) {
		*n++
		res := &harness.Results{History: filepath.Join(o.Dir, "history.jsonl"), Checks: []checker.Result{{Name: "resource", Verdict: checker.Valid}}}
		writeHistory(t, res.History)
		if slices.ContainsFunc(o.Schedule.Entries, func(e nemesis.Entry) bool { return e.Target == "c1" }) {
			res.Checks[0] = checker.Result{Name: "resource", Verdict: checker.Invalid, Violations: []checker.Violation{{Kind: "stale-write"}}}
		}
		if o.Shrunk == nil || o.Shrunk.From == "" {
			t.Errorf("a replay does not record what it was shrunk from: %+v", o.Shrunk)
		}
		return res, nil
	}
}

// Shrink replays candidates through the caller's Replay, keeps the fault
// that matters, writes the shrunk schedule, keeps the best reproduction's
// run and removes the other replays'.
func TestShrinkReplays(t *testing.T) {
	dir := failingDir(t)
	r := load(t, dir)
	var replays int
	out, err := r.Shrink(context.Background(), Settings{Replays: 2, Budget: time.Hour, Steps: Steps{Faults: true}, Replay: fakeReplay(t, &replays)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Best.Schedule.Entries) != 1 || out.Best.Schedule.Entries[0].Target != "c1" {
		t.Errorf("best %+v, want the pause of c1 alone", out.Best.Schedule.Entries)
	}
	if out.Final.Failed() != 2 || len(out.Final.Runs) != 2 || out.Interrupted || out.Note != "" {
		t.Errorf("final replays failed %d of %d (interrupted %v, note %q), want 2 of 2", out.Final.Failed(), len(out.Final.Runs), out.Interrupted, out.Note)
	}
	if replays < 4 {
		t.Errorf("%d replays, want the candidates' and the result's", replays)
	}
	s, err := nemesis.ReadFile(filepath.Join(dir, ScheduleFile))
	if err != nil || out.Schedule != filepath.Join(dir, ScheduleFile) || len(s.Entries) != 1 {
		t.Errorf("shrunk schedule %s: %+v, %v", out.Schedule, s.Entries, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, WorkDir, "*"))
	if out.Kept == "" || !slices.Equal(left, []string{out.Kept}) {
		t.Errorf("runs left %v, want the one kept (%q)", left, out.Kept)
	}
}

// A schedule whose replays no longer fail is an error; nothing is written
// and no replay's run is left.
func TestShrinkNoLongerFails(t *testing.T) {
	dir := failingDir(t)
	r := load(t, dir)
	var replays int
	never := func(ctx context.Context, o harness.Options) (*harness.Results, error) {
		o.Schedule = &nemesis.Schedule{}
		return fakeReplay(t, &replays)(ctx, o)
	}
	_, err := r.Shrink(context.Background(), Settings{Replays: 1, Budget: time.Hour, Steps: Steps{Faults: true}, Replay: never})
	if err == nil || !strings.Contains(err.Error(), "no longer fails") {
		t.Errorf("error %v, want that it no longer fails", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ScheduleFile)); !os.IsNotExist(err) {
		t.Errorf("a shrunk schedule was written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, WorkDir)); !os.IsNotExist(err) {
		t.Errorf("the replays' runs were left behind: %v", err)
	}
}
