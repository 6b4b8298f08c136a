package harness

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/scenario"
)

// Scenario is a catalog scenario as a run plays it (package scenario holds
// the catalog): what it teaches and the verdicts it expects of this run's
// resource and recipe.
type Scenario struct {
	Name   string            `json:"name"`
	Lesson string            `json:"lesson"`
	Expect map[string]string `json:"expect"` // check name: verdict
	// Bugs are the upstream bugs the scenario reproduces (with the
	// recipes that show them).
	Bugs []scenario.Bug `json:"bugs,omitempty"`
	// Met says whether every expected check came out as expected; Missed
	// are those that did not. Both are set once the run is checked.
	Met    *bool  `json:"met,omitempty"`
	Missed []Miss `json:"missed,omitempty"`
}

// Miss is an expected check that came out otherwise: Got is its verdict,
// empty if it was not checked.
type Miss struct {
	Check string `json:"check"`
	Got   string `json:"got"`
	Want  string `json:"want"`
}

func (m Miss) String() string {
	if m.Got == "" {
		return fmt.Sprintf("%s was not checked, expected %s", m.Check, m.Want)
	}
	return fmt.Sprintf("%s is %s, expected %s", m.Check, m.Got, m.Want)
}

// MissedText lists the misses in a line.
func (s *Scenario) MissedText() string {
	var out []string
	for _, m := range s.Missed {
		out = append(out, m.String())
	}
	return strings.Join(out, "; ")
}

// ExpectText lists the expected verdicts in order of check name:
// "resource invalid, invariant valid".
func (s *Scenario) ExpectText() string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.Expect)) {
		out = append(out, name+" "+s.Expect[name])
	}
	return strings.Join(out, ", ")
}

// judge returns a copy of s with the verdicts of checks compared to what it
// expects; nil for a run that plays no scenario.
func (s *Scenario) judge(checks []checker.Result) *Scenario {
	if s == nil {
		return nil
	}
	out := *s
	out.Missed = nil
	for _, name := range slices.Sorted(maps.Keys(s.Expect)) {
		want := s.Expect[name]
		got := ""
		if i := slices.IndexFunc(checks, func(c checker.Result) bool { return c.Name == name }); i >= 0 {
			got = string(checks[i].Verdict)
		}
		if got != want {
			out.Missed = append(out.Missed, Miss{Check: name, Got: got, Want: want})
		}
	}
	met := len(out.Missed) == 0
	out.Met = &met
	return &out
}
