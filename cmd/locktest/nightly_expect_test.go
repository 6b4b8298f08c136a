package main

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

// A scenario run that missed its expectation fails with the check's story;
// one whose expected check came out unknown is an error instead.
func TestExpectationMet(t *testing.T) {
	res := &harness.Results{Checks: []checker.Result{
		{Name: "resource", Verdict: checker.Valid, Explanation: "no stale write"},
		{Name: "contract", Verdict: checker.Unknown, Explanation: "timed out"},
	}}
	sc := &harness.Scenario{Missed: []harness.Miss{
		{Check: "resource", Got: "valid", Want: "invalid"},
		{Check: "contract", Got: "unknown", Want: "valid"},
	}}
	failed, unknown := expectationMet(sc, res)
	if failed != "resource is valid, expected invalid: no stale write" {
		t.Errorf("failed %q", failed)
	}
	if !strings.HasPrefix(unknown, "contract is unknown, expected valid: timed out") {
		t.Errorf("unknown %q", unknown)
	}
	if f, u := expectationMet(&harness.Scenario{}, res); f != "" || u != "" {
		t.Errorf("met scenario: %q %q", f, u)
	}
}
