package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputPathsRefusedFirst: an output path that cannot be written (a
// file stands where its directory should be) is an error of one line,
// exit 2, before any run starts: no run directory is made, no cluster
// started.
func TestOutputPathsRefusedFirst(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "a-file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "runs")
	under := filepath.Join(blocker, "x")
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"--out", []string{"nightly", "--budget", "1m", "--out", under}},
		{"--junit", []string{"nightly", "--budget", "1m", "--out", out, "--junit", filepath.Join(under, "j.xml")}},
		{"--summary", []string{"nightly", "--budget", "1m", "--out", out, "--summary", filepath.Join(under, "s.md")}},
		{"--out", []string{"sweep", "--seeds", "1", "--out", under}},
		{"--out", []string{"compare", "--recipes", "mutex", "--out", under}},
		{"--out", []string{"run", "--out", under}},
	} {
		code, stdout, stderr := runMain(t, tc.args...)
		line := strings.TrimSpace(stderr)
		if code != exitUnknown || !strings.Contains(line, tc.flag+":") || strings.Contains(line, "\n") {
			t.Errorf("%s: exit %d, stderr %q (%d lines), want 2 and one line naming %s", strings.Join(tc.args, " "), code, stderr[:min(len(stderr), 400)], strings.Count(stderr, "\n"), tc.flag)
		}
		if strings.Contains(stdout, "ready in") {
			t.Errorf("%s: a run started:\n%s", strings.Join(tc.args, " "), stdout)
		}
		if ents, _ := os.ReadDir(out); len(ents) > 0 {
			t.Errorf("%s: left %v in --out", strings.Join(tc.args, " "), ents)
		}
	}
}
