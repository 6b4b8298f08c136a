package shrink

import (
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

// A run's history times its faults from the recorder's start, its nemesis
// report from the fault phase's: Observe lines them up, finds the failure,
// the faults in force then, and the fault the end cut short.
func TestObserve(t *testing.T) {
	history := filepath.Join(t.TempDir(), "history.jsonl")
	// Entries 0 and 2 struck (entry 1 never found its target); the heal
	// began at 9.0 s of fault-phase time, cutting entry 2 short.
	lines := []string{
		`{"index":0,"type":"info","f":"setup","process":"nemesis","time":0}`,
		`{"index":1,"type":"info","f":"start","process":"nemesis","time":2100000000,"value":{"fault":"pause-client","targets":["c1"]}}`,
		`{"index":2,"type":"info","f":"stop","process":"nemesis","time":5100000000,"value":{"fault":"pause-client","targets":["c1"]}}`,
		`{"index":3,"type":"info","f":"start","process":"nemesis","time":7100000000,"value":{"fault":"isolate","targets":["c2"]}}`,
		`{"index":4,"type":"info","f":"stop","process":"nemesis","time":9100000000,"value":{"fault":"isolate","targets":["c2"]}}`,
		`{"index":5,"type":"info","f":"heal","process":"nemesis","time":9200000000,"value":{"fault":"all"}}`,
	}
	if err := os.WriteFile(history, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := &harness.Results{
		Run: &harness.RunStats{Nemesis: &nemesis.Report{Heal: 100 * time.Millisecond, Faults: []nemesis.Fired{
			{Entry: 0, Fault: nemesis.PauseClient, Targets: []string{"c1"}, Start: 2 * time.Second, Stop: 5 * time.Second},
			{Entry: 2, Fault: nemesis.Isolate, Targets: []string{"c2"}, Start: 7 * time.Second, Stop: 9 * time.Second},
		}}},
		Checks: []checker.Result{
			{Name: "mutex", Verdict: checker.Invalid, Violations: []checker.Violation{{Kind: "overlap", To: 3_000_000_000}}},
			{Name: "resource", Verdict: checker.Invalid, Violations: []checker.Violation{
				{Kind: "not-linearizable", From: 0, To: 9_000_000_000},
				{Kind: "stale-write", From: 4_000_000_000, To: 5_600_000_000, Faults: []checker.Fault{{Fault: nemesis.PauseClient, Index: 1}}},
			}},
		},
	}
	o, err := Observe(res, history, Target{Check: "resource"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Failed || o.Violation != 5500*time.Millisecond {
		t.Errorf("failed %v at %v, want true at 5.5 s (the stale write's end, less the 0.1 s between the two clocks)", o.Failed, o.Violation)
	}
	if !slices.Equal(o.Suspects, []int{0}) {
		t.Errorf("suspects %v, want [0]", o.Suspects)
	}
	want := []Window{{Struck: true, Start: 2 * time.Second, Stop: 5 * time.Second, Targets: []string{"c1"}}, {},
		{Struck: true, Start: 7 * time.Second, Stop: 9 * time.Second, Cut: true, Targets: []string{"c2"}}}
	if len(o.Struck) != 3 {
		t.Fatalf("windows %+v", o.Struck)
	}
	for i := range want {
		if w := o.Struck[i]; w.Struck != want[i].Struck || w.Start != want[i].Start || w.Stop != want[i].Stop || w.Cut != want[i].Cut || !slices.Equal(w.Targets, want[i].Targets) {
			t.Errorf("window %d %+v, want %+v", i, w, want[i])
		}
	}
	if o, _ := Observe(res, history, Target{Check: "contract"}); o.Failed || o.Violation != 0 {
		t.Errorf("a check that held: %+v", o)
	}
}

func TestChooseTarget(t *testing.T) {
	res := &harness.Results{Required: []string{"resource", "contract"}, Checks: []checker.Result{
		{Name: "mutex", Verdict: checker.Invalid},
		{Name: "resource", Verdict: checker.Valid},
		{Name: "contract", Verdict: checker.Invalid, Violations: []checker.Violation{{Kind: "promise 4"}, {Kind: "promise 2"}}},
	}}
	for spec, want := range map[string]string{"": "contract promise 4", "mutex": "mutex", "contract:2": "contract promise 2", "contract": "contract"} {
		got, err := ChooseTarget(res, spec)
		if err != nil || got.String() != want {
			t.Errorf("--check %q: %v, %v; want %s", spec, got, err, want)
		}
	}
	for _, spec := range []string{"resource", "contract:3", "mutex:1", "nonsense"} {
		if _, err := ChooseTarget(res, spec); err == nil || IsNoFailure(err) {
			t.Errorf("--check %q: %v, want an error naming what is wrong", spec, err)
		}
	}
	res.Required = []string{"resource"}
	if _, err := ChooseTarget(res, ""); !IsNoFailure(err) {
		t.Errorf("no required check failed: %v", err)
	}
}
