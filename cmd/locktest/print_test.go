package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
)

// The in-words lines speak of the backend's own mechanism, and of a token
// that is not a fencing token as such.
func TestReadingByBackend(t *testing.T) {
	results := func(backend string, noFencing bool) *harness.Results {
		return &harness.Results{Backend: backend, Terms: registry.Backends().Terms(backend), NoFencingToken: noFencing, MutexOverlaps: 3, WritesRejected: 2, Checks: []checker.Result{
			{Name: histories.CheckMutex, Verdict: checker.Invalid},
			{Name: histories.CheckContract, Verdict: checker.Valid, LeaseRaces: 3},
			{Name: histories.CheckResource, Verdict: checker.Valid},
		}}
	}
	cases := []struct {
		r         *harness.Results
		want, not []string
	}{
		{results("etcd", false),
			[]string{"etcd documents this for leases", "3 were the lease race (expected for any lease lock; fencing is the cure)", "fencing kept the resource safe: it rejected 2 stale writes"},
			[]string{"TTL", "not a fencing token"}},
		{results("redis", false),
			[]string{"the lock's key expires on the server (TTL) whether or not its holder is done", "3 were the expiry race", "fencing kept the resource safe"},
			[]string{"etcd", "lease", "not a fencing token"}},
		{results("redis", true),
			[]string{"fencing is the cure, which this recipe's token cannot give)", "the resource stayed safe in this run, though not thanks to fencing: this recipe's token is not a fencing token"},
			[]string{"etcd", "lease", "fencing kept"}},
	}
	for _, tc := range cases {
		got := strings.Join(reading(tc.r), "\n")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s (no fencing token: %v): missing %q in\n%s", tc.r.Backend, tc.r.NoFencingToken, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s (no fencing token: %v): %q in\n%s", tc.r.Backend, tc.r.NoFencingToken, n, got)
			}
		}
	}
	// Without revisions the contract check cannot tell an overlap's cause:
	// the reading says so, and never that no two clients held the lock.
	untold := results("redis", true)
	untold.Checks[1] = checker.Result{Name: histories.CheckContract, Verdict: checker.Invalid, Unjudged: []string{"3 (overlap only after loss)"}}
	if got := strings.Join(reading(untold), "\n"); !strings.Contains(got, "3 overlaps of holders, not told apart into the expiry race") ||
		strings.Contains(got, "no two clients") {
		t.Errorf("overlaps the contract check could not judge:\n%s", got)
	}
	// Fencing with tokens that went back: the resource kept to its check,
	// the data was damaged all the same, and the reading says so.
	repeated := results("redis", false)
	repeated.Checks[1] = checker.Result{Name: histories.CheckContract, Verdict: checker.Invalid, Violations: []checker.Violation{{Kind: "promise 1"}}}
	repeated.Checks = append(repeated.Checks, checker.Result{Name: histories.CheckInvariant, Verdict: checker.Invalid})
	if got := strings.Join(reading(repeated), "\n"); !strings.Contains(got, "the data was damaged although the resource kept to its fencing check") ||
		!strings.Contains(got, "same token to two holders") || strings.Contains(got, "safe") {
		t.Errorf("a valid resource over a damaged invariant:\n%s", got)
	}
	damaged := results("redis", true)
	damaged.Checks[2].Verdict = checker.Invalid
	if got := strings.Join(reading(damaged), "\n"); !strings.Contains(got, "a user of this lock cannot fence") {
		t.Errorf("damaged resource without a fencing token:\n%s", got)
	}
}

// No sentence blames the lease (or session) for an overlap that began
// while the earlier holder's key was on the server: the lease's words go
// to the races only, and every class is counted.
func TestReadingByOverlapClass(t *testing.T) {
	for _, backend := range []string{"etcd", "zookeeper"} {
		terms := registry.Backends().Terms(backend)
		r := &harness.Results{Backend: backend, Terms: terms, MutexOverlaps: 264, Checks: []checker.Result{
			{Name: histories.CheckMutex, Verdict: checker.Invalid},
			{Name: histories.CheckContract, Verdict: checker.Invalid, LockBugs: 264, Violations: []checker.Violation{{Kind: "promise 3"}}},
		}}
		got := strings.Join(reading(r), "\n")
		if strings.Contains(got, terms.Unsafe) || !strings.Contains(got, "264 the lock's bug") || !strings.Contains(got, "0 were "+terms.Race+" and 264 were bugs in the lock") {
			t.Errorf("%s, every overlap the lock's bug:\n%s", backend, got)
		}
		r.Checks[1] = checker.Result{Name: histories.CheckContract, Verdict: checker.Unknown, LeaseRaces: 2, LockBugs: 0, Undecided: 3, Unjudged: []string{"3 (overlap only after loss)"}}
		got = strings.Join(reading(r), "\n")
		if strings.Contains(got, terms.Unsafe) || !strings.Contains(got, "2 "+terms.Race) || !strings.Contains(got, "3 not told apart") || !strings.Contains(got, "3 could not be told apart") {
			t.Errorf("%s, races and undecided:\n%s", backend, got)
		}
		r.Checks[1] = checker.Result{Name: histories.CheckContract, Verdict: checker.Valid, LeaseRaces: 5}
		if got := strings.Join(reading(r), "\n"); !strings.Contains(got, terms.Unsafe) {
			t.Errorf("%s, every overlap a race: the lease's words are missing:\n%s", backend, got)
		}
	}
}

// The liveness line says from when it judged the acquires as the run had
// faults or not: a run with faults once they had ended, one without from
// the start.
func TestLivenessLine(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "histories", "curated", "paused-holder-fenced.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var quiet []string // the same history without its faults
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(line, `"f":"start"`) && !strings.Contains(line, `"f":"stop"`) && !strings.Contains(line, `"f":"heal"`) {
			quiet = append(quiet, line)
		}
	}
	dir := t.TempDir()
	for name, history := range map[string]string{"once every fault had ended": string(b), "from the start (a run without faults)": strings.Join(quiet, "")} {
		path := filepath.Join(dir, strings.Fields(name)[0]+".jsonl")
		if err := os.WriteFile(path, []byte(history), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := harness.Check(path, harness.CheckOptions{Backends: registry.Backends(), Required: []string{"resource"}})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		printChecks(&out, res)
		if !strings.Contains(out.String(), "acquires judged "+name) {
			t.Errorf("want the liveness line to say %q:\n%s", name, out.String())
		}
	}
}
