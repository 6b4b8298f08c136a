package main

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/scenario"
)

// The targets: each upstream bug's recipes with the check their scenario
// expects to fail on the fenced resource, once each, then the recipes
// broken on purpose no bug names, with the contract check or the one a
// scenario expects of them.
func TestPowerTargets(t *testing.T) {
	cat := scenario.Catalog{
		{Name: "a", Run: scenario.Settings{Recipe: "exec:x", Backend: "redis"},
			Bugs:   []scenario.Bug{{Ref: "x#1", Recipes: []string{"exec:x"}}},
			Expect: map[string]map[string]string{scenario.Fenced: {"liveness": scenario.Invalid, "resource": scenario.Valid}}},
		{Name: "b", Bugs: []scenario.Bug{{Ref: "y#2", Recipes: []string{"old", "exec:x"}}},
			ByRecipe: map[string]map[string]string{"old": {"contract": scenario.Invalid}, "fixed": {"contract": scenario.Valid},
				"broken2": {"mutex": scenario.Invalid}}},
		{Name: "c", Run: scenario.Settings{Recipe: "broken3"},
			Expect: map[string]map[string]string{scenario.Fenced: {"mutex": scenario.Invalid, "resource": scenario.Valid}}},
	}
	got := powerTargets(cat, []string{"old", "broken1", "broken2", "broken3"})
	want := []powerTarget{
		{Recipe: "exec:x", Backend: "redis", Check: "liveness", Bug: "x#1"},
		{Recipe: "old", Check: "contract", Bug: "y#2"},
		{Recipe: "broken1", Check: "contract", Bug: "broken on purpose"},
		{Recipe: "broken2", Check: "mutex", Bug: "broken on purpose"},
		{Recipe: "broken3", Check: "mutex", Bug: "broken on purpose"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("powerTargets =\n%+v\nwant\n%+v", got, want)
	}
}

// The real catalog names the etcd bugs the issue measures, with contract.
func TestPowerTargetsOfTheCatalog(t *testing.T) {
	checks := map[string]string{}
	for _, tg := range powerTargets(registry.Backends().Catalog(), brokenRecipes(ownBackends)) {
		checks[tg.Recipe] = tg.Check
	}
	for r, c := range map[string]string{"mutex-3.4": "contract", "election": "contract", "mutex-retry": "contract", "zk-unprotected": "liveness", "unlock-any": "contract", "lock-rpc": "contract",
		"pg-lease-client-clock": "mutex"} {
		if checks[r] != c {
			t.Errorf("%s: check %q, want %q", r, checks[r], c)
		}
	}
}

// A target whose bug lives in a version of the server runs on it, as its
// scenario does: lock-rpc on etcd 3.4.23's processes (the built-in etcd
// has the fix, and power caught it in 0 of 5 runs there), unless the
// command line says otherwise; the next target gets the defaults back.
func TestPowerRunsTheAffectedVersion(t *testing.T) {
	var rpc powerTarget
	for _, tg := range powerTargets(registry.Backends().Catalog(), brokenRecipes(ownBackends)) {
		if tg.Recipe == "lock-rpc" {
			rpc = tg
		}
	}
	if rpc.System["etcd-bin"] != "/usr/bin/etcd" || rpc.System["cluster"] != "process" {
		t.Fatalf("lock-rpc's target runs on %v, not etcd 3.4.23's processes", rpc.System)
	}
	for _, given := range [][]string{nil, {"--etcd-bin", "/opt/etcd"}} {
		fs := newFlags("power", "", nil)
		rf := addRunFlags(fs, ownBackends)
		if err := parseFlags(fs, given); err != nil {
			t.Fatal(err)
		}
		before := fs.Lookup("etcd-bin").Value.String()
		restore, err := rf.onSystem(rpc.System)
		if err != nil {
			t.Fatal(err)
		}
		want := "/usr/bin/etcd"
		if given != nil {
			want = "/opt/etcd"
		}
		if got := fs.Lookup("etcd-bin").Value.String(); got != want || fs.Lookup("cluster").Value.String() != "process" {
			t.Errorf("given %q: --etcd-bin %q, --cluster %q", given, got, fs.Lookup("cluster").Value.String())
		}
		if rf.set("cluster") {
			t.Error("a setting of the target's reads as given on the command line")
		}
		restore()
		if got := fs.Lookup("etcd-bin").Value.String(); got != before || fs.Lookup("cluster").Value.String() == "process" {
			t.Errorf("given %q: after the target, --etcd-bin %q, --cluster %q", given, got, fs.Lookup("cluster").Value.String())
		}
	}
	if _, err := (&runFlags{fs: newFlags("power", "", nil)}).onSystem(map[string]string{"no-such": "x"}); err == nil {
		t.Error("a setting that is no flag was taken")
	}
}

// A row counts the runs whose check failed by the bug's story, apart from
// those it failed by another, and the median time to their first
// violation of the story; the first violation is the earliest to begin.
func TestPowerTally(t *testing.T) {
	r := powerRow{Runs: []powerRun{
		{Verdict: checker.Invalid, First: 9 * time.Second},
		{Verdict: checker.Valid},
		{Verdict: checker.Invalid, First: 3 * time.Second},
		{Verdict: checker.Unknown},
		{Verdict: checker.Invalid, First: 5 * time.Second},
		{Verdict: checker.Invalid}, // the check told no time: not 0 s
		{Verdict: checker.Invalid, Other: true, First: time.Second},
	}}
	r.tally()
	if r.Caught != 4 || r.Others != 1 || r.Median == nil || *r.Median != 5*time.Second {
		t.Errorf("tally: caught %d, others %d, median %v", r.Caught, r.Others, r.Median)
	}
	c := checker.Result{Violations: []checker.Violation{{From: int64(4 * time.Second)}, {From: int64(2 * time.Second)}}}
	if shown, at := story(c, nil); !shown || at != 2*time.Second {
		t.Errorf("story = %v, %v", shown, at)
	}
	// The mutex check: porcupine's window from the first operation, an
	// overlap at 6 s, and a summary of more overlaps.
	c = checker.Result{Violations: []checker.Violation{{Kind: "not-linearizable", From: int64(time.Millisecond)},
		{Kind: "overlap", Processes: []int{1, 2}, From: int64(6 * time.Second)}, {Kind: "overlap"}}}
	if shown, at := story(c, nil); !shown || at != 6*time.Second {
		t.Errorf("story of the mutex check = %v, %v, want the overlap's 6s", shown, at)
	}
	// A bug that shows as promise 4: a token that did not grow at 2 s is
	// another story, and the first of its own is at 7 s.
	c = checker.Result{Violations: []checker.Violation{{Kind: "promise 1", Processes: []int{1}, From: int64(2 * time.Second)},
		{Kind: "promise 4", Processes: []int{2}, From: int64(7 * time.Second)}}}
	if shown, at := story(c, []string{"promise 4"}); !shown || at != 7*time.Second {
		t.Errorf("story of promise 4 = %v, %v, want 7s", shown, at)
	}
	if shown, _ := story(c, []string{"unwoken"}); shown {
		t.Error("a check broken by promises 1 and 4 shows an unwoken waiter")
	}
	var b strings.Builder
	r.Recipe, r.Bug, r.Check = "mutex-3.4", "etcd#11456", "contract"
	printPower(&b, []powerRow{r})
	if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), "contract 4/7 1 5.0 s") {
		t.Errorf("table:\n%s", b.String())
	}
}

// Every catalogued bug whose check is the contract's tells which promise
// it breaks, and that promise is one the contract check names: a bug
// story power could never match would count every catch as another's.
func TestPowerTargetsShowTheirStory(t *testing.T) {
	for _, tg := range powerTargets(registry.Backends().Catalog(), nil) {
		if tg.Check != "contract" {
			continue
		}
		if len(tg.Shows) == 0 {
			t.Errorf("%s (%s): no promise named", tg.Recipe, tg.Bug)
		}
		for _, k := range tg.Shows {
			if n, err := strconv.Atoi(strings.TrimPrefix(k, "promise ")); err != nil || n < 1 || n > 8 /* the contract check's eight */ {
				t.Errorf("%s (%s): %q is no promise of the contract check", tg.Recipe, tg.Bug, k)
			}
		}
	}
}

// --recipe is refused (power runs its own), and so is a recipe the
// catalog does not name as buggy; --list runs nothing.
func TestPowerFlags(t *testing.T) {
	var out strings.Builder
	if _, err := powerCmd(ownBackends, []string{"--recipe", "mutex"}, &out); err == nil || !strings.Contains(err.Error(), "--recipes") {
		t.Errorf("--recipe: %v", err)
	}
	if _, err := powerCmd(ownBackends, []string{"--recipes", "mutex", "--out", t.TempDir()}, &out); err == nil || !strings.Contains(err.Error(), "not a catalogued buggy recipe") {
		t.Errorf("--recipes mutex: %v", err)
	}
	out.Reset()
	if code, err := powerCmd(ownBackends, []string{"--list", "--recipes", "mutex-retry"}, &out); code != exitValid || err != nil || !strings.HasPrefix(out.String(), "mutex-retry") {
		t.Errorf("--list: %d, %v, %q", code, err, out.String())
	}
}
