package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

func checkCmd(bs *backend.Set, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("check", "check PATH [flags]\n\nRe-checks a stored history: a history.jsonl file, or a run directory holding one.\nResults go beside it: results.json in a run directory, NAME.results.json for a file.", stdout)
	require := fs.String("require", harness.RequireData, "checks whose failure makes the exit status 1: a comma list of "+strings.Join(checker.Names(), ", ")+" (consistency only when the results carry member hashes), all, or "+harness.RequireData+" (resource, and invariant unless it is unknown)")
	timeout := fs.Duration("timeout", time.Minute, "time limit for each check; a check that hits it is unknown")
	bound := fs.Duration("liveness-bound", harness.DefaultLivenessBound, livenessBoundUsage)
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() != 1 {
		return exitUnknown, fmt.Errorf("check: want exactly one PATH (a history file or a run directory), got %d (see locktest check --help)", fs.NArg())
	}
	required, err := harness.ParseRequire(*require)
	if err != nil {
		return exitUnknown, err
	}
	if *timeout <= 0 {
		return exitUnknown, fmt.Errorf("--timeout must be positive, got %v", *timeout)
	}
	if *bound <= 0 {
		return exitUnknown, fmt.Errorf("--liveness-bound must be positive, got %v", *bound)
	}

	path := fs.Arg(0)
	st, err := os.Stat(path)
	if err != nil {
		return exitUnknown, fmt.Errorf("check: %w", err)
	}
	dir, history, out := filepath.Dir(path), path, ""
	if st.IsDir() {
		dir, history = path, filepath.Join(path, "history.jsonl")
		out = filepath.Join(dir, "results.json")
		if _, err := os.Stat(history); errors.Is(err, os.ErrNotExist) {
			return exitUnknown, fmt.Errorf("check: %s holds no history.jsonl: not a run directory, or a run cut short before it recorded anything", path)
		}
	} else {
		out = filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+".results.json")
	}

	earlier := earlierResults(out)
	co := harness.CheckOptions{Backends: bs, VisualizationDir: dir, Timeout: *timeout, Required: required, LivenessBound: *bound}
	if earlier != nil {
		co.Hashes = earlier.Hashes
	}
	if isTerminal(os.Stderr) {
		co.Progress = os.Stderr
	}
	res, err := harness.Check(history, co)
	if err != nil {
		return exitUnknown, err
	}
	keepRunFacts(earlier, res)
	if err := res.WriteFile(out); err != nil {
		return exitUnknown, fmt.Errorf("check: writing results: %w", err)
	}
	fmt.Fprintf(stdout, "locktest check %s\n", relPath(history))
	printChecks(stdout, res)
	fmt.Fprintf(stdout, "results: %s\n", relPath(out))
	writeReport(stdout, strings.TrimSuffix(out, "results.json")+"report.html", res)
	return res.Exit, nil
}

// earlierResults are the results an earlier check or run wrote at path
// (nil: none that can be read), with their configuration as stored.
func earlierResults(path string) *harness.Results {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var old struct {
		harness.Results
		Config json.RawMessage `json:"config"`
	}
	if json.Unmarshal(b, &old) != nil {
		return nil
	}
	r := old.Results
	r.Config = nil
	if len(old.Config) > 0 {
		r.Config = old.Config
	}
	return &r
}

// keepRunFacts carries the seed, configuration and run figures of earlier
// results (the members' hashes go to the check) into a re-check, so
// re-checking a run directory does not lose what produced it.
func keepRunFacts(earlier, res *harness.Results) {
	if earlier == nil {
		return
	}
	res.Seed, res.Run, res.Interrupted, res.Shrunk = earlier.Seed, earlier.Run, earlier.Interrupted, earlier.Shrunk
	if earlier.Config != nil {
		res.Config = earlier.Config
	}
}
