package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/scenario"
)

// powerTarget is a buggy recipe whose bug a random run should find: the
// check its bug breaks, and where the catalog says so.
type powerTarget struct {
	Recipe  string `json:"recipe"`
	Backend string `json:"backend,omitempty"` // for an exec: recipe
	Check   string `json:"check"`
	Bug     string `json:"bug"` // the upstream bug, or "broken on purpose"
	// Shows are the kinds of violation of Check that are the bug's story
	// (scenario.Bug's Shows); none: any.
	Shows []string `json:"shows,omitempty"`
	// System are the settings of the backend's own system the bug's
	// scenario runs it on, by flag name: the affected version (lock-rpc:
	// etcd 3.4.23's member processes; the built-in etcd has the fix).
	System map[string]string `json:"system,omitempty"`
}

// powerRun is one seed of one target.
type powerRun struct {
	Seed int64  `json:"seed"`
	Dir  string `json:"dir"`
	// Verdict is the target's check's.
	Verdict checker.Verdict `json:"verdict"`
	// Other is an invalid check none of whose violations is of a kind
	// the bug shows: the check broke, but not by this bug's story (a
	// slow grant where the bug is a waiter never woken).
	Other bool `json:"other,omitempty"`
	// First is when the check's first violation of the bug's story began,
	// in the history (which starts as the clients do); 0 when it held or
	// the check told no time.
	First time.Duration `json:"first_violation_ns,omitempty"`
	Cells int           `json:"cells"`
}

// powerRow is a target's line of the table.
type powerRow struct {
	powerTarget
	Runs   []powerRun     `json:"runs"`
	Caught int            `json:"caught"`
	Others int            `json:"others,omitempty"` // runs whose check broke by another story
	Median *time.Duration `json:"median_first_ns,omitempty"`
}

// powerTargets are the catalog's buggy recipes: each upstream bug's recipes
// with the check its scenario expects to fail on the fenced resource, then
// the recipes broken on purpose that no bug names, with the contract check
// (or the check a scenario expects of them to fail: one that names them,
// or one that is theirs).
func powerTargets(cat scenario.Catalog, broken []string) []powerTarget {
	var out []powerTarget
	seen := map[string]bool{}
	add := func(t powerTarget) {
		if t.Check != "" && !seen[t.Recipe] {
			seen[t.Recipe] = true
			out = append(out, t)
		}
	}
	for _, sc := range cat {
		for _, b := range sc.Bugs {
			for _, r := range b.Recipes {
				add(powerTarget{Recipe: r, Backend: sc.Run.Backend, Check: failing(sc.Expected(r, scenario.Fenced)), Bug: b.Ref, Shows: b.Shows, System: sc.Run.System})
			}
		}
	}
	for _, r := range broken {
		check := "contract"
		for _, sc := range cat {
			if _, ok := sc.ByRecipe[r]; ok || sc.Run.Recipe == r {
				if c := failing(sc.Expected(r, scenario.Fenced)); c != "" {
					check = c
					break
				}
			}
		}
		add(powerTarget{Recipe: r, Check: check, Bug: "broken on purpose"})
	}
	return out
}

// failing is the check an expectation wants invalid (the first by name).
func failing(expect map[string]string) string {
	var out []string
	for c, v := range expect {
		if v == scenario.Invalid {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return ""
	}
	return out[0]
}

// brokenRecipes are the built-in recipes broken on purpose.
func brokenRecipes(bs *backend.Set) []string {
	var out []string
	for _, b := range bs.All() {
		for _, r := range b.Recipes {
			if r.Broken {
				out = append(out, r.Name)
			}
		}
	}
	return out
}

// onSystem sets the flags of a target's system that the command line does
// not give (those the command line gives are the user's to choose), and
// returns what sets them back for the next target. It sets their values
// only, so that they still read as not given.
func (f *runFlags) onSystem(system map[string]string) (restore func(), err error) {
	var undo []func()
	restore = func() {
		for _, u := range undo {
			u()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(system)) {
		fl := f.fs.Lookup(name)
		if fl == nil {
			restore()
			return nil, fmt.Errorf("its scenario's system setting --%s is no flag", name)
		}
		if f.set(name) {
			continue
		}
		was := fl.Value.String()
		if err := fl.Value.Set(system[name]); err != nil {
			restore()
			return nil, fmt.Errorf("its scenario's --%s=%s: %w", name, system[name], err)
		}
		undo = append(undo, func() { fl.Value.Set(was) })
	}
	return restore, nil
}

// story says whether check c's violations hold one of the kinds shows
// names (any kind when it names none), and when the first of those began;
// 0 when the check tells no violation's time. Porcupine's window of a
// history that is not linearizable begins at the history's first
// operation, not at the harm, and a summary of further overlaps names no
// processes: neither tells a time (the mutex check's overlaps do).
func story(c checker.Result, shows []string) (shown bool, at time.Duration) {
	var first int64 = -1
	for _, v := range c.Violations {
		if len(shows) > 0 && !slices.Contains(shows, v.Kind) {
			continue
		}
		shown = true
		if v.Kind == "not-linearizable" || len(v.Processes) == 0 && v.Kind == "overlap" {
			continue
		}
		if first < 0 || v.From < first {
			first = v.From
		}
	}
	return shown || len(shows) == 0, time.Duration(max(first, 0))
}

// tally counts a row's caught runs and the median time to the first
// violation among those whose check told it.
func (r *powerRow) tally() {
	r.Caught, r.Others, r.Median = 0, 0, nil
	var firsts []time.Duration
	for _, run := range r.Runs {
		switch {
		case run.Verdict != checker.Invalid:
		case run.Other:
			r.Others++
		default:
			r.Caught++
			if run.First > 0 {
				firsts = append(firsts, run.First)
			}
		}
	}
	if len(firsts) > 0 {
		slices.Sort(firsts)
		m := firsts[len(firsts)/2]
		r.Median = &m
	}
}

func powerCmd(bs *backend.Set, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("power", "power [flags]\n\nHow often random faults find the bugs locktest knows: each catalogued buggy recipe (an upstream\nbug's recipe, and every recipe broken on purpose) runs over --seeds seeds, one run at a time,\nand the table says in how many runs the check its bug breaks failed by the bug's story (the\nkinds of violation the catalog says it shows; --list names them), in how many it failed by\nanother (column other), and how soon. Defaults: --nemesis all, --time 30s. Takes every flag\nof run but --recipe.", stdout)
	rf := addRunFlags(fs, bs)
	seeds := fs.Int("seeds", 5, "number of seeds per recipe")
	first := fs.Int64("first-seed", 1, "first seed; the others follow it")
	only := fs.String("recipes", "", "comma list of the catalogued buggy recipes to run (default: all of them)")
	list := fs.Bool("list", false, "list the catalogued buggy recipes and their checks, and run nothing")
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("power: unexpected argument %q (see locktest power --help)", fs.Arg(0))
	}
	if rf.set("recipe") {
		return exitUnknown, fmt.Errorf("power: --recipe is not for power; use --recipes")
	}
	if *seeds < 1 {
		return exitUnknown, fmt.Errorf("--seeds must be at least 1, got %d", *seeds)
	}
	if !rf.set("nemesis") {
		*rf.faults = "all"
	}
	if !rf.set("time") {
		*rf.runTime = 30 * time.Second
	}
	targets := powerTargets(bs.Catalog(), brokenRecipes(bs))
	if *only != "" {
		var keep []powerTarget
		for _, r := range splitList(*only) {
			i := slices.IndexFunc(targets, func(t powerTarget) bool { return t.Recipe == r })
			if i < 0 {
				var names []string
				for _, t := range targets {
					names = append(names, t.Recipe)
				}
				return exitUnknown, fmt.Errorf("--recipes: %q is not a catalogued buggy recipe (want one of %s)", r, strings.Join(names, ", "))
			}
			keep = append(keep, targets[i])
		}
		targets = keep
	}
	if *list {
		for _, t := range targets {
			line := fmt.Sprintf("%-40s %-10s %s", t.Recipe, t.Check, t.Bug)
			if len(t.Shows) > 0 {
				line += " (" + strings.Join(t.Shows, ", ") + ")"
			}
			fmt.Fprintln(stdout, line)
		}
		return exitValid, nil
	}
	if err := os.MkdirAll(*rf.out, 0o755); err != nil {
		return exitUnknown, fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(stdout, "locktest power: %d recipes, seeds %d-%d, --nemesis %s, --nemesis-mix %s, --time %s\n",
		len(targets), *first, *first+int64(*seeds)-1, *rf.faults, *rf.mix, *rf.runTime)
	ctx, stop := signalContext()
	defer stop()
	var rows []powerRow
	code := exitValid
	for _, t := range targets {
		row := powerRow{powerTarget: t}
		*rf.recipe, *rf.backend = t.Recipe, ""
		if execlock.IsSpec(t.Recipe) {
			*rf.backend = t.Backend
		}
		restore, err := rf.onSystem(t.System)
		if err != nil {
			return exitUnknown, fmt.Errorf("%s: %w", t.Recipe, err)
		}
		for i := range *seeds {
			if ctx.Err() != nil {
				break
			}
			o, err := rf.options()
			o.Workload.Seed = *first + int64(i)
			var p *harness.Plan
			if err == nil {
				p, err = harness.NewPlan(o)
			}
			if err != nil {
				fmt.Fprintf(stdout, "%s: skipped: %s\n", t.Recipe, words.OneLine(err))
				code = exitUnknown
				break
			}
			if p.Dir, err = harness.NewRunDir(*rf.out, p.Workload.Seed); err != nil {
				return exitUnknown, err
			}
			res, err := p.Run(ctx)
			if err != nil {
				harness.Discard(p.Dir)
				fmt.Fprintf(stdout, "%s seed %d: %s\n", t.Recipe, p.Workload.Seed, words.OneLine(err))
				code = exitUnknown
				continue
			}
			run := powerRun{Seed: p.Workload.Seed, Dir: p.Dir, Verdict: checker.Unknown}
			for _, c := range res.Checks {
				if c.Name == t.Check {
					run.Verdict = c.Verdict
					if c.Verdict == checker.Invalid {
						shown, at := story(c, t.Shows)
						run.Other, run.First = !shown, at
					}
				}
			}
			if res.Run != nil && res.Run.Nemesis != nil {
				run.Cells = len(res.Run.Nemesis.Cells)
			}
			row.Runs = append(row.Runs, run)
			at := "-"
			if run.First > 0 {
				at = fmt.Sprintf("%.1fs", run.First.Seconds())
			}
			verdict := string(run.Verdict)
			if run.Other {
				verdict += ", not by the bug's story (" + strings.Join(t.Shows, ", ") + ")"
			}
			fmt.Fprintf(stdout, "  %s seed %d: %s %s (first at %s, %d cells) %s\n", t.Recipe, run.Seed, t.Check, verdict, at, run.Cells, relPath(run.Dir))
		}
		restore()
		row.tally()
		rows = append(rows, row)
	}
	printPower(stdout, rows)
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return exitUnknown, err
	}
	path := filepath.Join(*rf.out, fmt.Sprintf("power-%s.json", time.Now().Format("20060102-150405")))
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return exitUnknown, err
	}
	fmt.Fprintf(stdout, "power results: %s\n", relPath(path))
	if ctx.Err() != nil {
		return exitUnknown, nil
	}
	return code, nil
}

// printPower prints the table: per recipe, its bug, its check, the runs
// that caught it, those whose check broke by another story, and the
// median time to the first violation.
func printPower(w io.Writer, rows []powerRow) {
	fmt.Fprintf(w, "%-40s %-20s %-10s %-8s %-6s %s\n", "recipe", "bug", "check", "caught", "other", "median first violation")
	for _, r := range rows {
		med := "-"
		if r.Median != nil {
			med = fmt.Sprintf("%.1f s", r.Median.Seconds())
		}
		fmt.Fprintf(w, "%-40s %-20s %-10s %-8s %-6d %s\n", r.Recipe, r.Bug, r.Check, fmt.Sprintf("%d/%d", r.Caught, len(r.Runs)), r.Others, med)
	}
}
