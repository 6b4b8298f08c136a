package harness

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/locktest/locktest/checker"
)

// Scenario is a catalog scenario as a run plays it (package scenario holds
// the catalog): what it teaches and the verdicts it expects of this run's
// resource and recipe.
type Scenario struct {
	Name   string            `json:"name"`
	Lesson string            `json:"lesson"`
	Expect map[string]string `json:"expect"` // check name: verdict
	// Met says whether every expected check came out as expected; Missed
	// names those that did not, with what they were. Both are set once the
	// run is checked.
	Met    *bool    `json:"met,omitempty"`
	Missed []string `json:"missed,omitempty"`
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
		i := slices.IndexFunc(checks, func(c checker.Result) bool { return c.Name == name })
		switch {
		case i < 0:
			out.Missed = append(out.Missed, fmt.Sprintf("%s was not checked, expected %s", name, want))
		case string(checks[i].Verdict) != want:
			out.Missed = append(out.Missed, fmt.Sprintf("%s is %s, expected %s", name, checks[i].Verdict, want))
		}
	}
	met := len(out.Missed) == 0
	out.Met = &met
	return &out
}
