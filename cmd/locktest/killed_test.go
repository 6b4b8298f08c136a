package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/scratch"
)

// testKilledRuns kills real runs with SIGKILL part way, under faults, as a
// CI job past its time limit is killed: embedded members, member processes,
// Redis. Nothing of a run is left outside its run directory (the run's
// TMPDIR, HOME and working directory stay empty), the killed run's history
// re-checks as cut short (one line saying where, exit 2, or 1 with a
// violation), and the next run removes what the killed ones left in their
// run directories.
func testKilledRuns(t *testing.T) {
	out := t.TempDir()
	cases := []struct {
		name  string
		args  string
		lines int // the history's length when the run is killed
		needs string
	}{
		{"embedded", "--nemesis all", 120, ""},
		{"process", "--cluster process --nemesis pause,crash,partition", 150, ""},
		{"redis", "--recipe redis-setnx --nemesis pause,crash,isolate", 90, "redis-server"},
	}
	var left []string // the scratch directories the killed runs left
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs != "" {
				if _, err := exec.LookPath(tc.needs); err != nil {
					t.Skipf("skipped: %s is not installed (apt-get install %s)", tc.needs, tc.needs)
				}
			}
			// Runs side by side under out, each with an empty TMPDIR, HOME
			// and working directory, which must stay empty.
			before, _ := os.ReadDir(out)
			run := func() string {
				ents, _ := os.ReadDir(out)
				for _, e := range ents {
					if !slices.ContainsFunc(before, func(b os.DirEntry) bool { return b.Name() == e.Name() }) {
						return filepath.Join(out, e.Name())
					}
				}
				return ""
			}
			tmp, home, cwd := t.TempDir(), t.TempDir(), t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestRuns$")
			cmd.Dir = cwd
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+home,
				"LOCKTEST_CLI_ARGS=run "+tc.args+" --time 30s --seed "+strconv.Itoa(i+1)+" --out "+out)
			var stdout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var children []int
			if !eventually(t, 60*time.Second, func() bool {
				children = proc.Children(cmd.Process.Pid)
				b, err := os.ReadFile(filepath.Join(run(), "history.jsonl"))
				return err == nil && bytes.Count(b, []byte("\n")) >= tc.lines
			}) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the run did not record %d lines:\n%s", tc.lines, stdout.String())
			}
			cmd.Process.Kill()
			cmd.Wait()
			if !eventually(t, 10*time.Second, func() bool { return !slices.ContainsFunc(children, proc.Alive) }) {
				t.Fatalf("processes %v outlived the killed run", children)
			}
			for _, d := range []string{tmp, home, cwd} {
				if ents, _ := os.ReadDir(d); len(ents) > 0 {
					t.Errorf("the killed run left %v in %s, outside its run directory", names(ents), d)
				}
			}
			dir := run()
			data, _ := filepath.Glob(filepath.Join(dir, "locktest-*"))
			left = append(left, data...)
			t.Logf("killed at %d lines: the run directory holds %s, of which %s in %d scratch directories",
				tc.lines, scratch.Size(scratch.DiskUsage(dir)), scratch.Size(diskUsage(data)), len(data))

			code, stdout2, stderr := runMain(t, "check", dir)
			cut := ""
			for _, l := range strings.Split(stdout2, "\n") {
				if strings.HasPrefix(l, "cut short: ") {
					cut = l
				}
			}
			if cut == "" || !strings.Contains(cut, "without the run's end") || !strings.Contains(cut, "no end event") {
				t.Errorf("check does not say the run was cut short:\n%s%s", stdout2, stderr)
			}
			if !strings.Contains(stdout2, "verdict: ") || strings.Contains(stderr, "history.jsonl:") {
				t.Errorf("the killed run's history is not checkable:\n%s%s", stdout2, stderr)
			}
			switch {
			case code == exitInvalid && strings.Contains(stdout2, "verdict: invalid"):
			case code != exitUnknown:
				t.Errorf("check of the killed run: exit %d, want 2 (or 1 with a violation)\n%s", code, stdout2)
			}
			t.Logf("check: exit %d, %s", code, cut)
		})
	}
	if len(left) == 0 {
		return
	}
	// The next run, beside the killed ones, removes what they left: the
	// harness's own logic (any run sweeps the run directories beside its
	// own), so on the fake backend, in a process of its own (this test
	// runs beside others, which use the real backends).
	next := cliCommand("run", "--nemesis", "none", "--time", "1s", "--quiet", "100ms", "--out", out)
	next.Env = append(next.Env, "LOCKTEST_CLI_FAKE=1")
	var stdout, stderr bytes.Buffer
	next.Stdout, next.Stderr = &stdout, &stderr
	if err := next.Run(); err != nil {
		t.Fatalf("the next run: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, d := range left {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the next run left %s in place: %v", d, err)
		}
	}
	if !strings.Contains(stdout.String(), "that killed runs left behind") {
		t.Errorf("the next run does not say what it removed:\n%s", stdout.String())
	}
}

func names(ents []os.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func diskUsage(paths []string) int64 {
	var n int64
	for _, p := range paths {
		n += scratch.DiskUsage(p)
	}
	return n
}
