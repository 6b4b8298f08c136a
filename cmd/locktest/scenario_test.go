package main

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

// A scenario run exits on its expectations: 0 when its checks came out as
// it expects (the harm it shows included), 1 when one came out otherwise,
// 2 when one was unknown or not checked; a definite miss outweighs an
// unknown one. When that differs from the run's own exit status, it says
// so.
func TestScenarioExit(t *testing.T) {
	met, missed := true, false
	for _, tc := range []struct {
		name   string
		met    *bool
		misses []harness.Miss
		exit   int // the run's own
		want   int
		says   string
	}{
		{"harm as expected", &met, nil, exitInvalid, exitValid, "exit 0: its verdicts are the ones it expects (a scenario exits on its expectations; the run's own verdict, invalid, would exit 1)"},
		{"safe as expected", &met, nil, exitValid, exitValid, ""},
		{"no harm where expected", &missed, []harness.Miss{{Check: "resource", Got: "valid", Want: "invalid"}}, exitValid, exitInvalid, "exit 1: a verdict is not the one it expects"},
		{"unknown", &missed, []harness.Miss{{Check: "resource", Got: "unknown", Want: "invalid"}}, exitUnknown, exitUnknown, ""},
		{"not checked", &missed, []harness.Miss{{Check: "contract", Want: "invalid"}}, exitValid, exitUnknown, "exit 2: a verdict it expects is unknown"},
		{"a miss outweighs an unknown", &missed, []harness.Miss{{Check: "contract", Got: "unknown", Want: "valid"}, {Check: "resource", Got: "invalid", Want: "valid"}}, exitInvalid, exitInvalid, ""},
		{"no scenario", nil, nil, exitInvalid, exitInvalid, ""},
	} {
		res := &harness.Results{Exit: tc.exit, Verdict: map[int]checker.Verdict{0: checker.Valid, 1: checker.Invalid, 2: checker.Unknown}[tc.exit]}
		if tc.met != nil {
			res.Scenario = &harness.Scenario{Name: "s", Met: tc.met, Missed: tc.misses}
		}
		code, says := scenarioExit(res)
		if code != tc.want || !strings.HasPrefix(says, tc.says) || (tc.says == "") != (says == "") {
			t.Errorf("%s: exit %d, says %q; want %d, %q", tc.name, code, says, tc.want, tc.says)
		}
	}
}
