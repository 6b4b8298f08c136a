package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
)

// checkNames are the checks --require accepts, besides "all".
var checkNames = []string{"mutex", "resource"}

// parseRequire turns "mutex,resource" or "all" into check names.
func parseRequire(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "all":
			out = append(out, checkNames...)
		case slices.Contains(checkNames, name):
			out = append(out, name)
		default:
			return nil, fmt.Errorf("--require: unknown check %q (want %s or all)", name, strings.Join(checkNames, ", "))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Results is what results.json holds.
type Results struct {
	Seed        *int64            `json:"seed,omitempty"`
	Config      *RunConfig        `json:"config,omitempty"`
	Versions    map[string]string `json:"versions"`
	History     string            `json:"history"`
	Interrupted bool              `json:"interrupted,omitempty"`
	Run         *RunStats         `json:"run,omitempty"`
	Checks      []checker.Result  `json:"checks"`
	// WritesRejected counts writes the resource refused for a stale token.
	WritesRejected int             `json:"writes_rejected"`
	CheckTime      time.Duration   `json:"check_ns"`
	Required       []string        `json:"required"`
	Verdict        checker.Verdict `json:"verdict"`
	Exit           int             `json:"exit"`
}

// verdict combines the required checks: any invalid makes the whole invalid;
// otherwise any unknown makes it unknown.
func verdict(checks []checker.Result, required []string) (checker.Verdict, int) {
	v, code := checker.Valid, exitValid
	for _, r := range checks {
		if !slices.Contains(required, r.Name) {
			continue
		}
		switch r.Verdict {
		case checker.Invalid:
			return checker.Invalid, exitInvalid
		case checker.Unknown:
			v, code = checker.Unknown, exitUnknown
		}
	}
	return v, code
}

// versions names what produced the results, from the binary's build info.
func versions() map[string]string {
	v := map[string]string{"go": runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v["locktest"] = info.Main.Version
	for _, d := range info.Deps {
		switch d.Path {
		case "go.etcd.io/etcd/server/v3":
			v["etcd"] = d.Version
		case "github.com/Shopify/toxiproxy/v2":
			v["toxiproxy"] = d.Version
		case "github.com/anishathalye/porcupine":
			v["porcupine"] = d.Version
		}
	}
	return v
}

// check reads a history and runs every check on it.
func check(path, vizDir string, timeout time.Duration, required []string) (*Results, error) {
	ops, err := histories.ReadFile(path)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	checks := checker.All(ops, checker.Options{Timeout: timeout, VisualizationDir: vizDir})
	res := &Results{
		Versions:  versions(),
		History:   path,
		Checks:    checks,
		CheckTime: time.Since(began),
		Required:  required,
	}
	for _, op := range ops {
		if op.F == histories.Write && op.Type == histories.Fail {
			res.WritesRejected++
		}
	}
	res.Verdict, res.Exit = verdict(checks, required)
	return res, nil
}

func writeResults(path string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// printChecks writes one line per check, and the explanation of any check
// that is not valid.
func printChecks(w io.Writer, r *Results) {
	for _, c := range r.Checks {
		req := ""
		if slices.Contains(r.Required, c.Name) {
			req = " (required)"
		}
		fmt.Fprintf(w, "  %-9s %-8s %d ops, %d keys, %d unknown outcomes, checked in %s%s\n",
			c.Name, c.Verdict, c.Ops, c.Keys, c.Unknown, c.Duration.Round(time.Millisecond), req)
		if c.Verdict != checker.Valid && c.Explanation != "" {
			for _, line := range strings.Split(c.Explanation, "\n") {
				fmt.Fprintf(w, "            %s\n", line)
			}
		}
	}
	if r.WritesRejected > 0 {
		fmt.Fprintf(w, "  the resource rejected %d writes that carried a stale fencing token\n", r.WritesRejected)
	}
	fmt.Fprintf(w, "verdict: %s (required: %s)\n", r.Verdict, strings.Join(r.Required, ", "))
}

func relPath(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return p
}
