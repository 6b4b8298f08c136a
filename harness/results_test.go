package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
)

func TestParseRequire(t *testing.T) {
	t.Parallel()
	got, err := ParseRequire("all")
	if err != nil || strings.Join(got, ",") != "consistency,contract,invariant,liveness,mutex,resource" {
		t.Errorf("all: %v %v", got, err)
	}
	if got, err := ParseRequire("liveness, mutex"); err != nil || strings.Join(got, ",") != "liveness,mutex" {
		t.Errorf("list: %v %v", got, err)
	}
	// A required check the results lack does not change the verdict.
	if v, code := verdict([]checker.Result{{Name: histories.CheckMutex, Verdict: checker.Valid}}, []string{"mutex", "consistency"}); v != checker.Valid || code != ExitValid {
		t.Errorf("verdict %s %d", v, code)
	}
}

// TestCheckRequiresAsTheCLIDoes: a Go caller's Required takes "all" and
// refuses a name that is no check's, as --require does; before, "all"
// required nothing and a history whose lock broke its contract passed.
func TestCheckRequiresAsTheCLIDoes(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "histories", "testdata", "overwritten-key.jsonl")
	res, err := Check(path, CheckOptions{Backends: backends, Required: []string{"all"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != ExitInvalid || len(res.Required) != len(checker.Names()) {
		t.Errorf("required all: exit %d, required %v; want %d with every check", res.Exit, res.Required, ExitInvalid)
	}
	if _, err := Check(path, CheckOptions{Backends: backends, Required: []string{"livenes"}}); err == nil || !strings.Contains(err.Error(), `"livenes"`) {
		t.Errorf("an unknown check: %v, want an error naming it", err)
	}
}

// TestDamagedDataDecides: by default (RequireData) a data check that
// judged decides the exit status: a lost update makes a tokenless lock's
// run invalid though resource is unknown; an invariant that cannot judge
// leaves the verdict to resource.
func TestDamagedDataDecides(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		history  string
		required []string
		exit     int
		names    string
	}{
		{"lost-update-no-token.jsonl", []string{RequireData}, ExitInvalid, "invariant,resource"},
		{"lost-update-no-token.jsonl", []string{histories.CheckResource}, ExitUnknown, "resource"},
		{"writes-without-reads.jsonl", []string{RequireData}, ExitValid, "resource"},
		{"writes-without-reads.jsonl", []string{histories.CheckInvariant, histories.CheckResource}, ExitUnknown, "invariant,resource"},
	} {
		res, err := Check(filepath.Join("..", "histories", "testdata", tc.history), CheckOptions{Backends: backends, Required: tc.required})
		if err != nil {
			t.Fatal(err)
		}
		if res.Exit != tc.exit || strings.Join(res.Required, ",") != tc.names {
			t.Errorf("%s, --require %v: exit %d requiring %v, want %d requiring %s", tc.history, tc.required, res.Exit, res.Required, tc.exit, tc.names)
		}
	}
	if got, err := ParseRequire("data,contract"); err != nil || strings.Join(got, ",") != "contract,data" {
		t.Errorf("data,contract: %v %v", got, err)
	}
}

// TestCheckVisualizesAndWordsFaults checks the harness's part of a check:
// it writes each check's visualization as NAME.html, and its stories word
// the faults as the nemesis describes them.
func TestCheckVisualizesAndWordsFaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	history := filepath.Join("..", "histories", "curated", "paused-holder-unfenced.jsonl")
	res, err := Check(history, CheckOptions{Backends: backends, VisualizationDir: dir, Required: checker.Names()})
	if err != nil {
		t.Fatal(err)
	}
	drawn := 0
	for _, c := range res.Checks {
		if c.Visual != nil {
			t.Errorf("%s: the visualization is kept after writing", c.Name)
		}
		if c.Visualization == "" {
			continue
		}
		drawn++
		if want := filepath.Join(dir, c.Name+".html"); c.Visualization != want {
			t.Errorf("%s: visualization %q, want %q", c.Name, c.Visualization, want)
		}
		b, err := os.ReadFile(c.Visualization)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "c1 was paused") {
			t.Errorf("%s: the visualization lacks the fault annotation", c.Name)
		}
	}
	if drawn != 2 {
		t.Errorf("%d visualizations, want mutex and resource", drawn)
	}
	if !strings.Contains(res.Checks[0].Explanation, "c1 was paused 2.03-6.00 s") {
		t.Errorf("mutex story does not word the pause as the nemesis does: %s", res.Checks[0].Explanation)
	}
}

// Check reads the resource's log beside the history: a write that timed out
// for its client but that the resource accepted with a stale token is a
// violation; a malformed log is a warning naming its line, not a failure.
func TestCheckUsesTheResourceLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	history := filepath.Join(dir, "history.jsonl")
	h := strings.Join([]string{
		`{"type":"invoke","f":"write","process":0,"time":0,"key":"k","value":{"token":9,"value":1}}`,
		`{"type":"ok","f":"write","process":0,"time":1,"key":"k","value":{"token":9,"value":1}}`,
		`{"type":"invoke","f":"write","process":1,"time":2,"key":"k","value":{"token":4,"value":7}}`,
		`{"type":"info","f":"write","process":1,"time":3,"key":"k","value":{"token":4,"value":7},"error":"timeout"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(history, []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	verdictOf := func() (checker.Verdict, []string) {
		res, err := Check(history, CheckOptions{Backends: backends, Required: []string{histories.CheckResource}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Checks {
			if c.Name == histories.CheckResource {
				return c.Verdict, res.Warnings
			}
		}
		t.Fatal("no resource check")
		return "", nil
	}
	if v, _ := verdictOf(); v != checker.Valid {
		t.Errorf("without the resource's log: %s, want valid (the write may never have arrived)", v)
	}
	log := `{"seq":1,"key":"k","token":9,"value":1,"at":"2026-11-23T08:00:00Z"}` + "\n" +
		`{"seq":2,"key":"k","token":4,"value":7,"at":"2026-11-23T08:00:01Z","stale":true}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, resourceLogName), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, _ := verdictOf(); v != checker.Invalid {
		t.Errorf("with the resource's log: %s, want invalid", v)
	}
	if err := os.WriteFile(filepath.Join(dir, resourceLogName), []byte(log+"{oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, w := verdictOf(); v != checker.Valid || len(w) != 1 || !strings.Contains(w[0], resourceLogName+":3:") {
		t.Errorf("with a malformed log: %s, warnings %q; want valid and a warning naming line 3", v, w)
	}
}

// A scenario's expectations are judged against the checks: a check that
// came out otherwise, or was not run, is a miss.
func TestScenarioJudge(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Name: "s", Expect: map[string]string{"resource": "invalid", "invariant": "valid", "contract": "valid"}}
	got := sc.judge([]checker.Result{{Name: "resource", Verdict: checker.Valid}, {Name: "invariant", Verdict: checker.Valid}}, nil)
	if got.Met == nil || *got.Met {
		t.Fatalf("judged met: %+v", got)
	}
	if want := "contract was not checked, expected valid; resource is valid, expected invalid"; got.MissedText() != want {
		t.Errorf("missed %q, want %q", got.MissedText(), want)
	}
	if sc.Met != nil || sc.Missed != nil {
		t.Error("judge changed the scenario it was given")
	}
	got = sc.judge([]checker.Result{{Name: "resource", Verdict: checker.Invalid}, {Name: "invariant", Verdict: checker.Valid}, {Name: "contract", Verdict: checker.Valid}}, nil)
	if !*got.Met || len(got.Missed) != 0 {
		t.Errorf("judged %+v, want met", got)
	}
	if (*Scenario)(nil).judge(nil, nil) != nil {
		t.Error("a run without a scenario was judged")
	}
}

// A scenario's exit status is by its expectations: 0 when its checks came
// out as it expects (the harm it shows included), 1 when one came out
// otherwise, 2 when one was unknown or not checked; a definite miss
// outweighs an unknown one.
func TestScenarioExit(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Name: "s", Expect: map[string]string{"resource": "invalid", "contract": "valid"}}
	for _, tc := range []struct {
		name   string
		checks map[string]checker.Verdict
		want   int
	}{
		{"harm as expected", map[string]checker.Verdict{"resource": checker.Invalid, "contract": checker.Valid}, ExitValid},
		{"no harm where expected", map[string]checker.Verdict{"resource": checker.Valid, "contract": checker.Valid}, ExitInvalid},
		{"unknown", map[string]checker.Verdict{"resource": checker.Unknown, "contract": checker.Valid}, ExitUnknown},
		{"not checked", map[string]checker.Verdict{"resource": checker.Invalid}, ExitUnknown},
		{"a miss outweighs an unknown", map[string]checker.Verdict{"resource": checker.Valid, "contract": checker.Unknown}, ExitInvalid},
	} {
		var checks []checker.Result
		for name, v := range tc.checks {
			checks = append(checks, checker.Result{Name: name, Verdict: v})
		}
		if got := sc.judge(checks, nil); got.Exit == nil || *got.Exit != tc.want {
			t.Errorf("%s: exit %v, want %d", tc.name, got.Exit, tc.want)
		}
	}
}

// A violation expected of a staging that did not happen (a fault of the
// script whose moment never came: param missed) is unknown, with why; a
// violation where none is expected is a miss all the same.
func TestScenarioUnstaged(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Name: "s", Expect: map[string]string{"mutex": "invalid", "contract": "valid"}}
	missed := []nemesis.Fired{
		{Fault: nemesis.PauseMember, Params: map[string]string{"missed": "no client was granted the lock while r3, r4 were paused"}},
		{Fault: nemesis.CrashMember},
	}
	for _, tc := range []struct {
		name   string
		checks map[string]checker.Verdict
		faults []nemesis.Fired
		want   int
		why    bool // Unstaged says why
	}{
		{"staged, no harm", map[string]checker.Verdict{"mutex": checker.Valid, "contract": checker.Valid}, missed[1:], ExitInvalid, false},
		{"not staged, no harm", map[string]checker.Verdict{"mutex": checker.Valid, "contract": checker.Valid}, missed, ExitUnknown, true},
		{"not staged, harm all the same", map[string]checker.Verdict{"mutex": checker.Invalid, "contract": checker.Valid}, missed, ExitValid, false},
		{"not staged, another miss", map[string]checker.Verdict{"mutex": checker.Valid, "contract": checker.Invalid}, missed, ExitInvalid, true},
	} {
		var checks []checker.Result
		for name, v := range tc.checks {
			checks = append(checks, checker.Result{Name: name, Verdict: v})
		}
		got := sc.judge(checks, tc.faults)
		if got.Exit == nil || *got.Exit != tc.want {
			t.Errorf("%s: exit %v, want %d", tc.name, got.Exit, tc.want)
		}
		if (got.Unstaged == "pause-member: no client was granted the lock while r3, r4 were paused") != tc.why {
			t.Errorf("%s: unstaged %q", tc.name, got.Unstaged)
		}
	}
}

// A fault of the script that never struck (the run ended while it waited
// for its moment: nothing of it is recorded) did not stage the scenario:
// no harm is then unknown, not a miss.
func TestScenarioUnstruckIsUnstaged(t *testing.T) {
	t.Parallel()
	sc := &Scenario{Name: "s", Expect: map[string]string{"liveness": "invalid"}}
	sched := &nemesis.Schedule{Entries: []nemesis.Entry{{Fault: nemesis.PauseMember}, {Fault: nemesis.LostReplyAcquire}}}
	fired := []nemesis.Fired{{Entry: 0, Fault: nemesis.PauseMember}}
	checks := []checker.Result{{Name: "liveness", Verdict: checker.Valid}}
	got := sc.judge(checks, append(fired, unstruck(sched, fired)...))
	if got.Exit == nil || *got.Exit != ExitUnknown || got.Unstaged != "lost-reply-acquire: the run ended before it struck" {
		t.Fatalf("exit %v, unstaged %q; want unknown, the lost reply named", got.Exit, got.Unstaged)
	}
	all := []nemesis.Fired{fired[0], {Entry: 1, Fault: nemesis.LostReplyAcquire}}
	if got := unstruck(sched, all); len(got) != 0 {
		t.Errorf("every entry struck: unstruck %v", got)
	}
}

// A run whose TTL is as long as the liveness bound is warned that a
// violation may be the TTL's; the default run is not.
func TestBoundUnderTTLWarned(t *testing.T) {
	t.Parallel()
	o := Options{LivenessBound: DefaultLivenessBound}
	o.Nemesis.Faults = []string{"crash"}
	o.Workload.TTL, o.Workload.OpTimeout = 2, 5*time.Second
	if w := o.boundUnderTTL(); w != "" {
		t.Errorf("the default TTL and bound: %q", w)
	}
	o.Workload.TTL = 20
	if w := o.boundUnderTTL(); !strings.Contains(w, "set --liveness-bound above the TTL") {
		t.Errorf("a 20 s TTL under a 7 s bound: %q", w)
	}
}
