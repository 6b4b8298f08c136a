package main

import (
	"strings"
	"testing"

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
