package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

// A hand-written history in the story: client 4 is paused while it
// holds the lock, its lease expires, client 2 acquires, and the unfenced
// resource accepts client 4's stale write when it wakes. Times start far from
// zero, indices are absent, params hold numbers, and there are extra fields.
const pausedHolder = `
{"type":"invoke","f":"acquire","process":4,"time":17000001000000000,"key":"lock","client":"c4"}
{"type":"ok","f":"acquire","process":4,"time":17000001900000000,"key":"lock","value":{"token":38}}
{"type":"invoke","f":"acquire","process":2,"time":17000002000000000,"key":"lock"}
{"type":"info","f":"start","process":"nemesis","time":17000002950000000,"value":{"fault":"pause-client","targets":["c4"],"params":{"signal":"SIGSTOP"}}}
{"type":"info","f":"key-deleted","process":"nemesis","time":17000003100000000,"value":{"targets":["c4"],"params":{"key":"lock","lease":7587,"revision":40,"create_revision":38,"by":"expiry"}}}
{"type":"ok","f":"acquire","process":2,"time":17000003200000000,"key":"lock","value":{"token":41}}
{"type":"invoke","f":"write","process":2,"time":17000003500000000,"key":"lock","value":{"token":41,"value":1}}
{"type":"ok","f":"write","process":2,"time":17000003600000000,"key":"lock","value":{"token":41,"value":1}}
{"type":"invoke","f":"release","process":2,"time":17000003700000000,"key":"lock"}
{"type":"ok","f":"release","process":2,"time":17000003710000000,"key":"lock"}
{"type":"info","f":"stop","process":"nemesis","time":17000004200000000,"value":{"fault":"pause-client","targets":["c4"]}}
{"type":"invoke","f":"write","process":4,"time":17000004220000000,"key":"lock","value":{"token":38,"value":2}}
{"type":"ok","f":"write","process":4,"time":17000004250000000,"key":"lock","value":{"token":38,"value":2}}
{"type":"invoke","f":"release","process":4,"time":17000004300000000,"key":"lock"}
{"type":"ok","f":"release","process":4,"time":17000004310000000,"key":"lock"}
`

func TestCheckHandWrittenInvalid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "paused.jsonl")
	if err := os.WriteFile(path, []byte(pausedHolder), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain(t, "check", "--require", "all", path)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	// Times are shown from the first record: the history's clock starts
	// days from zero.
	for _, want := range []string{
		"process 4 and process 2 both believed they held the lock from 2.20 s to 2.70 s",
		"process 4 acquired token 38 at 0.90 s",
		"c4 was paused 1.95-3.20 s",
		"the server deleted process 4's lock key (token 38) at 2.10 s: its lease expired on the server",
		"process 2 acquired token 41 at 2.20 s",
		"the resource accepted process 4's write with token 38 at 3.25 s, after process 2's write with token 41 at 2.60 s",
		"liveness",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	var res harness.Results
	b, err := os.ReadFile(filepath.Join(dir, "paused.results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, c := range res.Checks {
		for _, v := range c.Violations {
			kinds[c.Name+"/"+v.Kind] = true
			if v.Story == "" {
				t.Errorf("%s violation without a story: %+v", c.Name, v)
			}
		}
	}
	for _, k := range []string{"mutex/overlap", "mutex/not-linearizable", "resource/stale-write", "resource/not-linearizable"} {
		if !kinds[k] {
			t.Errorf("results.json lacks a %s violation: %v", k, kinds)
		}
	}
	for _, f := range []string{"mutex.html", "resource.html"} {
		html, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(html), "pause-client c4") {
			t.Errorf("%s lacks the fault annotation", f)
		}
	}

	// Member hashes carried in an earlier results file are re-checked.
	res.Hashes = []checker.MemberHash{{Member: "m0", Revision: 40, Hash: 1}, {Member: "m1", Revision: 40, Hash: 2}, {Member: "m2", Revision: 40, Hash: 1}}
	if err := res.WriteFile(filepath.Join(dir, "paused.results.json")); err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = runMain(t, "check", "--require", "all", path)
	if !strings.Contains(stdout, "Member m1 diverged") {
		t.Errorf("consistency not re-checked:\n%s", stdout)
	}
}

func TestCheckRejectionNamesLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.jsonl")
	os.WriteFile(path, []byte(`{"type":"invoke","f":"acquire","process":1,"time":5}`+"\n\n"+`{"type":"ok","f":"release","process":1,"time":6}`+"\n"), 0o644)
	code, _, stderr := runMain(t, "check", path)
	if code != exitUnknown || !strings.Contains(stderr, "h.jsonl:3: completion f \"release\" does not match invoke f \"acquire\"") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// Every run built from one set of flags shares the seed drawn for it, so
// that compare's configurations run under the same schedule.
func TestOneSeedForAllConfigurations(t *testing.T) {
	rf := addRunFlags(newFlags("compare", "", io.Discard), ownBackends)
	if err := parseFlags(rf.fs, nil); err != nil {
		t.Fatal(err)
	}
	a, err := rf.options()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b, err := rf.options()
		if err != nil {
			t.Fatal(err)
		}
		if b.Workload.Seed != a.Workload.Seed {
			t.Fatalf("seeds %d and %d", a.Workload.Seed, b.Workload.Seed)
		}
	}
}

// serve keeps to loopback unless told otherwise, and report refuses a
// directory without runs; both before anything starts.
func TestServeAndReportRefuse(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"serve", "--addr", "0.0.0.0:0", dir},
		{"serve", "--addr", ":0", dir},
		{"serve", filepath.Join(dir, "missing")},
		{"report", dir},
	} {
		var out, errOut strings.Builder
		if code := mainArgs(ownBackends, args, &out, &errOut); code != exitUnknown || strings.Count(strings.TrimSpace(errOut.String()), "\n") != 0 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errOut.String())
		}
	}
}

// TestCheckKilledAsItStarted: a run killed before it recorded anything
// leaves a run directory with no history, or an empty one: check says so.
func TestCheckKilledAsItStarted(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runMain(t, "check", dir)
	if code != exitUnknown || !strings.Contains(stderr, "holds no history.jsonl") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("no history: exit %d, stderr %q", code, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runMain(t, "check", dir)
	if code != exitUnknown || !strings.Contains(stdout, "cut short: the history is empty") {
		t.Errorf("an empty history: exit %d\n%s", code, stdout)
	}
}
