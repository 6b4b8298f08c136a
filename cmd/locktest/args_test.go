package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
)

// parseFlags takes flags before, between and after the arguments; "--"
// ends them, unless it is a flag's value.
func TestParseFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args []string
		n    int
		s    string
		v    bool
		rest []string
	}{
		{[]string{"a", "--n", "1", "b", "--v"}, 1, "", true, []string{"a", "b"}},
		{[]string{"--n=2", "a", "-v", "b", "-s", "x"}, 2, "x", true, []string{"a", "b"}},
		{[]string{"a", "--", "--n", "2", "b"}, 0, "", false, []string{"a", "--n", "2", "b"}},
		{[]string{"--v", "--", "-a"}, 0, "", true, []string{"-a"}},
		{[]string{"--s", "--", "a", "--n", "3"}, 3, "--", false, []string{"a"}},
		{[]string{"-", "--n", "4"}, 4, "", false, []string{"-"}},
		{[]string{"--v=false", "a", "--", "--v"}, 0, "", false, []string{"a", "--v"}},
		{nil, 0, "", false, []string{}},
	} {
		fs := newFlags("test", "test", io.Discard)
		n, s, v := fs.Int("n", 0, ""), fs.String("s", "", ""), fs.Bool("v", false, "")
		if err := parseFlags(fs, tc.args); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if *n != tc.n || *s != tc.s || *v != tc.v || !slices.Equal(fs.Args(), tc.rest) {
			t.Errorf("%q: n=%d s=%q v=%v args %q; want n=%d s=%q v=%v args %q", tc.args, *n, *s, *v, fs.Args(), tc.n, tc.s, tc.v, tc.rest)
		}
	}

	// Errors and --help are the flag package's, wherever the flag stands.
	fs := newFlags("test", "test", io.Discard)
	fs.Int("n", 0, "")
	if err := parseFlags(fs, []string{"a", "--n", "x"}); err == nil || !strings.Contains(err.Error(), `invalid value "x" for flag --n`) {
		t.Errorf("bad value after an argument: %v", err)
	}
	if err := parseFlags(fs, []string{"a", "--help"}); err != flag.ErrHelp {
		t.Errorf("--help after an argument: %v", err)
	}
}

// Every command takes its flags after its arguments as before them: the
// flag is honoured (here: its check or its error shows it was read), not
// counted as one more argument. A command that takes no argument names
// the one it was given, wherever it stands.
func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	history := filepath.Join(dir, "history.jsonl")
	if err := os.WriteFile(history, []byte(pausedHolder), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout (a run) or stderr (an error)
	}{
		// locktest check history.jsonl --require all: every check is required.
		{[]string{"check", history, "--require", "all"}, exitInvalid, "verdict: invalid (required: " + strings.Join(slices.Sorted(slices.Values(checker.Names())), ", ") + ")"},
		{[]string{"check", history, "--timeout", "0s"}, exitUnknown, "--timeout must be positive"},
		{[]string{"check", history, "--", "--require", "all"}, exitUnknown, "want exactly one PATH (a history file or a run directory), got 3"},
		{[]string{"report", empty, "--help"}, exitValid, "Usage: locktest report DIR"},
		{[]string{"serve", empty, "--addr", "0.0.0.0:0"}, exitUnknown, "--addr 0.0.0.0:0 listens beyond loopback"},
		{[]string{"serve", empty, "--addr"}, exitUnknown, "flag needs an argument: -addr"},
		{[]string{"scenario", "run", "--clients", "0", "paused-holder"}, exitUnknown, "clients must be at least 1"},
		{[]string{"scenario", "run", "--seed", "3"}, exitUnknown, "scenario run: want a scenario name"},
		{[]string{"scenario", "list", "--help"}, exitValid, "Usage: locktest scenario list"},
		{[]string{"version", "--help"}, exitValid, "Usage: locktest version"},
		{[]string{"run", "--seed", "1", "extra", "--clients", "2"}, exitUnknown, `run: unexpected argument "extra"`},
		{[]string{"sweep", "extra", "--seeds", "0"}, exitUnknown, `sweep: unexpected argument "extra"`},
		{[]string{"nightly", "extra", "--shard", "1/1"}, exitUnknown, `nightly: unexpected argument "extra"`},
		{[]string{"compare", "--recipes", "mutex", "extra"}, exitUnknown, `compare: unexpected argument "extra"`},
		{[]string{"version", "extra"}, exitUnknown, `version: unexpected argument "extra"`},
	} {
		code, stdout, stderr := runMain(t, tc.args...)
		got := stdout
		if code == exitUnknown {
			got = stderr
		}
		if code != tc.code || !strings.Contains(got, tc.out) {
			t.Errorf("locktest %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, stdout+stderr, tc.code, tc.out)
		}
		if code == exitUnknown && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("locktest %s: error is not one line: %q", strings.Join(tc.args, " "), stderr)
		}
	}
}

// --help prints the command's usage once, on stdout; a bad flag prints its
// one-line error on stderr and nothing on stdout (both printed the whole
// usage once more).
func TestHelpOnceErrorsAlone(t *testing.T) {
	for _, cmd := range []string{"run", "check", "sweep", "nightly", "compare", "report", "serve", "version"} {
		code, stdout, _ := runMain(t, cmd, "--help")
		if code != exitValid || strings.Count(stdout, "Usage: locktest "+cmd) != 1 {
			t.Errorf("%s --help: exit %d, usage printed %d times", cmd, code, strings.Count(stdout, "Usage:"))
		}
		code, stdout, stderr := runMain(t, cmd, "--no-such-flag")
		if code != exitUnknown || stdout != "" || !strings.Contains(stderr, "unknown flag --no-such-flag (see locktest "+cmd+" --help)") {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q; want 2, nothing, the error", cmd, code, stdout, stderr)
		}
	}
}
