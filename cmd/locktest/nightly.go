package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/report"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/workload"
)

// randomSettings are what a nightly's random-fault runs do unless the
// command line says otherwise: every fault, a verdict on the data and on
// the lock itself, and 60 s of faults (the cells a steered run strikes
// grow with its length, its start and its quiet end do not: the 88 cells
// of three backends take twelve 30-second runs, 550 s, or six of 60 s,
// 460 s).
var randomSettings = map[string]string{"nemesis": "all", "require": "resource,invariant,contract", "time": "60s"}

// randomRuns bounds the random-fault part of a nightly plan; the budget
// ends it long before.
const randomRuns = 100_000

func nightlyCmd(bs *backend.Set, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("nightly", "nightly [flags]\n\nThe command a CI job runs: every scenario of the catalog with the unfenced and the fenced\nresource for each recipe, then random-fault runs (fenced, --nemesis all, --time 60s, requiring resource,\ninvariant and contract) with fresh seeds, until the budget is spent: each steered toward the\n(lock state × fault) cells its system offers that no run on its backend has struck yet (--steer), a backend whose cells are all struck giving way to the others, and keeping\nfrom the scenarios the time it takes to strike them all, up to nine tenths of the budget. Every flag of run applies\nto every run (a scenario's own settings give way to them).", stdout)
	rf := addRunFlags(fs, bs)
	budget := fs.Duration("budget", 30*time.Minute, "time for the whole plan; no run starts that cannot finish inside it")
	shardFlag := fs.String("shard", "1/1", "run part K of N of the plan (K/N), for N CI workers")
	junitPath := fs.String("junit", "", "write JUnit XML here")
	summaryPath := fs.String("summary", "", "write a Markdown summary here")
	keep := fs.String("keep", "failures", "run directories to keep: failures or all")
	recipeList := fs.String("recipes", bs.Default().Recipes[0].Name, "comma list of lock recipes (an "+execlock.Prefix+" recipe runs on --backend; its command cannot hold a comma)")
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("nightly: unexpected argument %q", fs.Arg(0))
	}
	sh, err := parseShard(*shardFlag)
	if err != nil {
		return exitUnknown, err
	}
	if *keep != "failures" && *keep != "all" {
		return exitUnknown, fmt.Errorf("--keep: want failures or all, got %q", *keep)
	}
	recipes := splitList(*recipeList)
	for _, r := range recipes {
		if execlock.IsSpec(r) {
			if _, err := execlock.Parse(r); err != nil {
				return exitUnknown, fmt.Errorf("--recipes: %w", err)
			}
			continue
		}
		if _, _, ok := bs.Builtin(r); !ok {
			return exitUnknown, fmt.Errorf("--recipes: unknown lock recipe %q (want one of %v, or %sCOMMAND ARGS…)", r, bs.RecipeNames(), execlock.Prefix)
		}
	}
	if _, err := bs.For("", *rf.backend); err != nil {
		return exitUnknown, err
	}
	// Every worker must draw the same plan: the seed is the date unless given.
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	seed := *rf.seed
	if _, ok := given["seed"]; !ok {
		seed, _ = strconv.ParseInt(time.Now().UTC().Format("20060102"), 10, 64)
	}
	cheapest := runCost(*rf.runTime, *rf.quiet, *rf.opTimeout)
	for _, sc := range bs.Catalog() {
		if c := scenarioCost(sc, given); c < cheapest {
			cheapest = c
		}
	}
	if *budget < cheapest {
		return exitUnknown, fmt.Errorf("--budget %s is too small for one run (the shortest takes about %s)", *budget, cheapest)
	}
	var junit, summary *os.File
	for _, out := range []struct {
		path string
		f    **os.File
		flag string
	}{{*junitPath, &junit, "junit"}, {*summaryPath, &summary, "summary"}} {
		if out.path == "" {
			continue
		}
		if *out.f, err = createOutput(out.path); err != nil {
			return exitUnknown, fmt.Errorf("--%s: %w", out.flag, err)
		}
		defer (*out.f).Close()
	}
	if err := os.MkdirAll(*rf.out, 0o755); err != nil {
		return exitUnknown, fmt.Errorf("--out: %w", err)
	}

	fmt.Fprintf(stderr, "locktest nightly: seed %d, shard %d/%d, recipes %s, budget %s (run directories under %s)\n",
		seed, sh.k, sh.n, strings.Join(recipes, ","), *budget, *rf.out)
	ctx, stop := signalContext()
	defer stop()
	var runs []nightlyRun
	cov := newCoverage()
	var failed, unknown bool
	plan := nightlyPlan(bs, recipes, *rf.backend, seed, randomRuns)
	randomCost := runCost(*rf.runTime, *rf.quiet, *rf.opTimeout)
	// The recipes of this shard's random runs, in turn, and its first
	// random run's seed; the cells each recipe's system offers.
	var mine []string
	var firstRandom int64
	for i, p := range plan {
		if p.Scenario != "" || !sh.mine(i) {
			continue
		}
		if slices.Contains(mine, p.Recipe) {
			break
		}
		if len(mine) == 0 {
			firstRandom = p.Seed
		}
		mine = append(mine, p.Recipe)
		if o, _, err := nightlyOptions(bs, p, given); err == nil {
			cov.offer(p.Recipe, o.Backend, o.OfferedCells(), o.Unreached())
			randomCost = max(randomCost, runCost(o.Time, o.Quiet, o.Workload.OpTimeout))
		}
	}
	// The budget is the runs' time, counted from when the first can
	// start: drawing the plan (its 100,000 random runs) took 0.2-2.0 s
	// at load 60-65, which left a 25 s budget's first, 24 s scenario no
	// room (TestNightlyOnABudget).
	began := time.Now()
	need := -1 // runs the random runs need, -1 until estimated
	for i, p := range plan {
		if !sh.mine(i) || ctx.Err() != nil {
			continue
		}
		cost := randomCost
		if p.Scenario != "" {
			sc, _ := bs.Catalog().Lookup(p.Scenario)
			if err := missing(bs, sc.Settings(), p.Recipe, given["backend"]); err != nil {
				fmt.Fprintf(stderr, "skipped %s: %v\n", p.name(), err)
				continue
			}
			cost = scenarioCost(sc, given)
			// The random runs keep the time they need to steer a fault
			// at every offered cell not yet struck: estimated again only
			// after a run (drawing their schedules for each of a hundred
			// scenarios passed over took 27 s of a 10-minute nightly).
			if need < 0 && reserve(randomRuns, randomCost, *budget) == 0 {
				need = 0 // a budget too short to keep any random run: nothing to estimate
			}
			if need < 0 {
				need = cov.runsToCover(mine, firstRandom, int(*budget/randomCost)+1, func(r string, seed int64, steer []nemesis.Cell) []nemesis.Cell {
					return placedCells(bs, planned{Seed: seed, Recipe: r, Resource: string(resource.Fenced)}, steered(given, steer))
				})
			}
			if time.Since(began)+cost > *budget-reserve(need, randomCost, *budget) {
				continue
			}
		}
		if time.Since(began)+cost > *budget {
			if p.Scenario == "" {
				break
			}
			continue
		}
		runGiven, steer := given, []nemesis.Cell(nil)
		if p.Scenario == "" {
			if cov.skip(p.Recipe, mine) {
				continue
			}
			steer = cov.wanted(p.Recipe, p.Seed)
			runGiven = steered(given, steer)
		}
		stopBar := startBar(stderr, began, *budget, fmt.Sprintf("run %d: %s", len(runs)+1, p.name()))
		r, err := nightlyOne(bs, p, runGiven, stdout)
		stopBar()
		if err != nil {
			// One run that could not be carried out is an error of that
			// run; the others still run.
			r = nightlyRun{Name: p.name(), Error: words.OneLine(err)}
		}
		runs = append(runs, r)
		cov.strike(r.Backend, r.Cells)
		need = -1
		cov.steer(r.Name, r.Command, steer)
		status := "held"
		switch {
		case r.Failed != "":
			status, failed = "FAILED", true
		case r.Error != "":
			status, unknown = "UNKNOWN", true
		}
		where := r.Error
		if r.Dir != "" {
			where = relPath(r.Dir)
		}
		fmt.Fprintf(stderr, "nightly %4d %-40s %-7s %5.1fs  %s\n", len(runs), p.name(), status, r.Seconds, where)
		if *keep == "failures" && r.Failed == "" && r.Error == "" {
			os.RemoveAll(r.Dir)
		}
	}
	// As for one run: a violation found decides, then anything unknown.
	code := exitValid
	switch {
	case failed:
		code = exitInvalid
	case unknown:
		code = exitUnknown
	}
	if junit != nil {
		if err := writeJUnit(junit, runs); err != nil {
			return exitUnknown, fmt.Errorf("--junit: %w", err)
		}
	}
	cov.write(stderr)
	if summary != nil {
		err := writeSummary(summary, runs)
		if err == nil {
			_, err = fmt.Fprint(summary, "\n## Coverage\n\n")
		}
		if err == nil {
			cov.write(summary)
		}
		if err != nil {
			return exitUnknown, fmt.Errorf("--summary: %w", err)
		}
	}
	switch idx, err := report.WriteIndex(*rf.out); {
	case err == nil:
		fmt.Fprintf(stderr, "index: %s\n", relPath(idx))
	case errors.Is(err, report.ErrNoRuns):
		fmt.Fprintln(stderr, "index: none, no run directory was kept")
	default:
		fmt.Fprintf(stderr, "index: not written: %s\n", words.OneLine(err))
	}
	return code, nil
}

// createOutput creates (or truncates) an output file, and the directories
// it goes in: CI jobs point --junit and --summary at fresh paths. It is
// called before any run starts, so that a path that cannot be written is an
// error at once, not after the runs.
func createOutput(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.Create(path)
}

// scenarioCost is how long a scenario's run takes, given the flags that
// override its own.
func scenarioCost(sc scenario.Scenario, given map[string]string) time.Duration {
	get := func(name string, own, def time.Duration) time.Duration {
		if v, ok := given[name]; ok {
			if d, err := time.ParseDuration(v); err == nil {
				return d
			}
		}
		if own > 0 {
			return own
		}
		return def
	}
	return runCost(get("time", sc.Run.Time, defaultTime), get("quiet", sc.Run.Quiet, harness.DefaultQuiet),
		get("op-timeout", sc.Run.OpTimeout, workload.DefaultConfig().OpTimeout))
}

// nightlyOne carries out one planned run: the scenario's settings (or the
// random runs'), then the command line's flags, then the plan's recipe,
// resource and seed.
func nightlyOne(bs *backend.Set, p planned, given map[string]string, stdout io.Writer) (nightlyRun, error) {
	plan, out, err := nightlyOptions(bs, p, given)
	if err != nil {
		return nightlyRun{}, err
	}
	if plan.Dir, err = harness.NewRunDir(out, p.Seed); err != nil {
		return nightlyRun{}, err
	}
	began := time.Now()
	ctx, stop := signalContext()
	defer stop()
	res, err := plan.Run(ctx)
	if err != nil {
		harness.Discard(plan.Dir)
		return nightlyRun{}, err
	}
	writeReport(io.Discard, filepath.Join(plan.Dir, "report.html"), res)
	r := nightlyRun{Name: p.name(), Backend: plan.Backend, Dir: plan.Dir, Command: res.Command, Seconds: time.Since(began).Seconds(),
		Verdicts: map[string]string{}, Exit: res.Exit}
	if res.Run != nil && res.Run.Nemesis != nil {
		r.Cells = res.Run.Nemesis.Cells
	}
	for _, c := range res.Checks {
		r.Verdicts[c.Name] = string(c.Verdict)
	}
	if sc := res.Scenario; sc != nil {
		r.Bugs = sc.Bugs
		r.Failed, r.Error = expectationMet(sc, res)
		return r, nil
	}
	switch res.Exit {
	case exitInvalid:
		r.Failed, r.Shrink = firstFailure(res), shrinkHint(plan.Options, res)
	case exitUnknown:
		r.Error = firstUnknown(res)
	}
	return r, nil
}

// steered are the flags given, and a random run's --steer toward cells.
func steered(given map[string]string, cells []nemesis.Cell) map[string]string {
	if len(cells) == 0 {
		return given
	}
	g := maps.Clone(given)
	g["steer"] = nemesis.CellKeys(cells)
	return g
}

// placedCells are the cells that the schedule of the random run p,
// steered as given says, has room for (drawn on a system that offers
// every fault: see harness.DrawSchedule); none if it cannot be drawn.
func placedCells(bs *backend.Set, p planned, given map[string]string) []nemesis.Cell {
	plan, _, err := nightlyOptions(bs, p, given)
	if err != nil {
		return nil
	}
	s, err := harness.DrawSchedule(plan.Options)
	if err != nil || s == nil {
		return nil
	}
	var out []nemesis.Cell
	for _, e := range s.Entries {
		if c, err := nemesis.ParseCells(e.Params["cell"]); err == nil && len(c) == 1 {
			out = append(out, c[0])
		}
	}
	return out
}

// nightlyOptions are a planned run's plan, and the directory its run
// directory goes under.
func nightlyOptions(bs *backend.Set, p planned, given map[string]string) (*harness.Plan, string, error) {
	fs := flag.NewFlagSet("nightly run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rf := addRunFlags(fs, bs)
	var sc scenario.Scenario
	settings := randomSettings
	if p.Scenario != "" {
		// The scenario's settings come typed, under the flags set here
		// (play, stage).
		sc, _ = bs.Catalog().Lookup(p.Scenario)
		settings = nil
	}
	var setErr error
	set := func(k, v string) {
		if err := fs.Set(k, v); err != nil && setErr == nil {
			setErr = fmt.Errorf("nightly run of %s: --%s=%s: %w", p.Recipe, k, v, err)
		}
	}
	for k, v := range settings {
		set(k, v)
	}
	for k, v := range given {
		if fs.Lookup(k) != nil {
			set(k, v)
		}
	}
	set("recipe", p.Recipe)
	if _, _, builtin := bs.Builtin(p.Recipe); builtin {
		set("backend", "") // --backend is for the others
	}
	set("resource", p.Resource)
	set("seed", strconv.FormatInt(p.Seed, 10))
	if setErr != nil {
		return nil, "", setErr
	}
	if p.Scenario != "" {
		if err := rf.play(sc); err != nil {
			return nil, "", err
		}
	}
	o, err := rf.options()
	if err == nil && p.Scenario != "" {
		o.Schedule = nil // the scenario's scripted schedule
		err = rf.stage(&o, sc)
	}
	if err != nil {
		return nil, "", err
	}
	plan, err := harness.NewPlan(o)
	if err != nil {
		return nil, "", err
	}
	return plan, *rf.out, nil
}

// expectationMet says how a scenario run missed what its scenario
// expects, with each check's story: a check that came out otherwise is a
// failure; one that came out unknown is an error.
func expectationMet(sc *harness.Scenario, res *harness.Results) (failed, unknown string) {
	for _, m := range sc.Missed {
		line := m.String()
		if i := slices.IndexFunc(res.Checks, func(c checker.Result) bool { return c.Name == m.Check }); i >= 0 {
			line += ": " + res.Checks[i].Explanation
		}
		if m.Got == string(checker.Unknown) {
			unknown += line + "\n"
		} else {
			failed += line + "\n"
		}
	}
	return strings.TrimSpace(failed), strings.TrimSpace(unknown)
}

func firstFailure(res *harness.Results) string {
	for _, c := range res.Checks {
		if c.Verdict == checker.Invalid && slices.Contains(res.Required, c.Name) {
			return c.Name + ": " + c.Explanation
		}
	}
	return string(res.Verdict)
}

func firstUnknown(res *harness.Results) string {
	if res.Error != "" {
		return res.Error
	}
	for _, c := range res.Checks {
		if c.Verdict == checker.Unknown && slices.Contains(res.Required, c.Name) {
			return c.Name + " unknown: " + c.Explanation
		}
	}
	return "unknown"
}

// startBar draws, while a run goes on and only when w is a terminal, a bar
// of the budget spent; the returned func clears it.
func startBar(w io.Writer, began time.Time, budget time.Duration, what string) func() {
	f, ok := w.(*os.File)
	if !ok {
		return func() {}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return func() {}
	}
	const width = 30
	draw := func() {
		spent := time.Since(began)
		n := min(width, int(float64(width)*spent.Seconds()/budget.Seconds()))
		fmt.Fprintf(f, "\r\033[K[%s%s] %s of %s  %s", strings.Repeat("#", n), strings.Repeat(".", width-n),
			spent.Round(time.Second), budget, what)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			draw()
			select {
			case <-done:
				fmt.Fprint(f, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
