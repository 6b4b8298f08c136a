package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A nightly run on a budget for one scenario run: the budget decides what
// runs, the JUnit file and the summary say what happened, a passing run's
// directory is removed, and with nothing kept no index is written. The
// CLI's own bookkeeping: on the fake backend. A scenario as expected on
// real servers is the CLI's RedlockBareQuorum and ZooKeeperGhostNode, and
// paused-holder fenced on etcd etcdlock's ExamplePlay.
func TestNightlyOnABudget(t *testing.T) {
	dir := t.TempDir()
	// Output paths in directories that do not exist yet, as CI jobs give.
	ci := filepath.Join(dir, "ci")
	out, junit, summary := filepath.Join(ci, "runs"), filepath.Join(ci, "reports", "junit.xml"), filepath.Join(ci, "md", "summary.md")
	// Shard 2 of 20 starts with paused-holder, mem-mutex, fenced (about 15
	// s, planned as 24 s), which the fake's correct lock passes; no other
	// run of the shard fits in what is left.
	code, _, stderr := runOnFake(t, "nightly", "--budget", "25s", "--shard", "2/20", "--seed", "3", "--out", out,
		"--junit", junit, "--summary", summary)
	if code != exitValid {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites junitSuites
	if err := xml.Unmarshal(b, &suites); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, b)
	}
	if len(suites.Suites) != 1 || len(suites.Suites[0].Cases) != 1 {
		t.Fatalf("JUnit: %+v, want one suite with one case", suites)
	}
	c := suites.Suites[0].Cases[0]
	if c.Name != "paused-holder mem-mutex fenced" || c.Failure != nil || !strings.Contains(c.SystemOut, "locktest scenario run paused-holder") {
		t.Errorf("JUnit case %+v", c)
	}
	s, _ := os.ReadFile(summary)
	if !strings.Contains(string(s), "paused-holder mem-mutex fenced") {
		t.Errorf("summary lacks the run:\n%s", s)
	}
	// The scenario pauses the holder: the coverage names that cell, of
	// those the random runs' system (the fake's) offers.
	if !strings.Contains(string(s), "## Coverage") || !strings.Contains(string(s), "cells offered (lock state × fault, ") ||
		!strings.Contains(string(s), "holder×pause (1)") || !strings.Contains(string(s), "cells offered but not struck on fake (") ||
		!strings.Contains(stderr, "cells struck") {
		t.Errorf("no coverage in the summary:\n%s\nstderr:\n%s", s, stderr)
	}
	if ents, err := os.ReadDir(out); err != nil || len(ents) != 0 {
		t.Errorf("runs directory holds %v (%v), want nothing: the passing run removed", ents, err)
	}
	if !strings.Contains(stderr, "index: none") {
		t.Errorf("stderr does not say that no index was written:\n%s", stderr)
	}
	if !strings.Contains(stderr, "nightly    1 paused-holder mem-mutex fenced") || !strings.Contains(stderr, "held") {
		t.Errorf("no progress line for the run:\n%s", stderr)
	}
}
