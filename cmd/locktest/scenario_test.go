package main

import (
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

// A scenario run exits on its expectations (harness.Scenario's Exit);
// when that differs from the run's own exit status, it says so.
func TestScenarioExit(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   *int // the scenario's exit; nil: no scenario
		exit int  // the run's own
		says string
	}{
		{"harm as expected", ptr(exitValid), exitInvalid, "exit 0: its verdicts are the ones it expects (a scenario exits on its expectations; the run's own verdict, invalid, would exit 1)"},
		{"safe as expected", ptr(exitValid), exitValid, ""},
		{"no harm where expected", ptr(exitInvalid), exitValid, "exit 1: a verdict is not the one it expects"},
		{"not checked", ptr(exitUnknown), exitValid, "exit 2: a verdict it expects is unknown"},
		{"no scenario", nil, exitInvalid, ""},
	} {
		res := &harness.Results{Exit: tc.exit, Verdict: map[int]checker.Verdict{0: checker.Valid, 1: checker.Invalid, 2: checker.Unknown}[tc.exit]}
		want := tc.exit
		if tc.sc != nil {
			res.Scenario = &harness.Scenario{Name: "s", Exit: tc.sc}
			want = *tc.sc
		}
		code, says := scenarioExit(res)
		if code != want || !strings.HasPrefix(says, tc.says) || (tc.says == "") != (says == "") {
			t.Errorf("%s: exit %d, says %q; want %d, %q", tc.name, code, says, want, tc.says)
		}
	}
}

func ptr(i int) *int { return &i }

// A scenario's settings come typed over the options the flags build, but
// those the command line gives: its recipe and its system settings (by
// their flag names) first, the rest as harness.Apply sets them.
func TestScenarioUnderTheCommandLine(t *testing.T) {
	sc, err := registry.Backends().Catalog().Lookup("etcd-11456")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("scenario run", flag.ContinueOnError)
	rf := addRunFlags(fs, ownBackends)
	if err := fs.Parse([]string{"--time", "3s", "--think-min", "1s", "--raft-tick", "50", "--seed", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := rf.play(sc); err != nil {
		t.Fatal(err)
	}
	o, err := rf.scenarioOptions(sc)
	if err != nil {
		t.Fatal(err)
	}
	w := o.Workload
	if o.Time != 3*time.Second || w.ThinkMin != time.Second {
		t.Errorf("time %v, think-min %v: want the command line's 3s and 1s", o.Time, w.ThinkMin)
	}
	if w.Recipe.Name() != "lock-rpc" || w.ThinkMax != 5*time.Second || w.Clients != 3 || w.OpTimeout != 20*time.Second || w.SlowShare != 0 ||
		!slices.Equal(o.Required, []string{"contract"}) || o.Quiet != 6*time.Second {
		t.Errorf("recipe %s, think %v, %d clients, op timeout %v, slow share %v, required %v, quiet %v: want the scenario's",
			w.Recipe.Name(), w.ThinkMax, w.Clients, w.OpTimeout, w.SlowShare, o.Required, o.Quiet)
	}
	b, err := json.Marshal(o.System)
	if err != nil {
		t.Fatal(err)
	}
	if sys := string(b); !strings.Contains(sys, `"mode":"process"`) || !strings.Contains(sys, `"tick_ms":50`) || !strings.Contains(sys, `"election_ms":1000`) {
		t.Errorf("system %s: want the scenario's process cluster and election timeout, the command line's raft tick", sys)
	}
	if o.Scenario == nil || o.Scenario.Name != "etcd-11456" {
		t.Errorf("the scenario is not staged: %+v", o.Scenario)
	}
}
