package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/shrink"
)

// Defaults of locktest shrink.
const (
	defaultReplays      = 3
	defaultShrinkBudget = 10 * time.Minute
	// shrunkSchedule is the file shrink writes in the run directory, and
	// shrinkDir where the candidates' runs go.
	shrunkSchedule = "shrunk.schedule.json"
	shrinkDir      = "shrink"
)

func shrinkCmd(args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("shrink", "shrink RUNDIR [flags]\n\nSearches for a smaller fault schedule that still makes a failing run fail the same way (the\nsame check invalid; for contract, the same promise): fewer faults first, then faults that\nstart sooner and last less and an earlier end, then fewer clients. A candidate counts only\nif every one of its replays fails (or, when the original schedule itself failed in only some of\nas many replays, if it fails as often); the smallest is replayed again at the end. Writes\nRUNDIR/"+shrunkSchedule+" and keeps the best reproduction's run directory under\nRUNDIR/"+shrinkDir+"/ (replacing an earlier shrink's); Ctrl-C keeps the best found so far.\nExit status: 1 the failure reproduced, 0 nothing to shrink (a run that held, a scenario's\nscripted schedule), 2 an error, a schedule that no longer fails, or an interrupted search.", stdout)
	replays := fs.Int("replays", defaultReplays, "replays of each candidate, every one of which must fail (as many as the original's did, when not all of its did); the result is replayed as many times again")
	budget := fs.Duration("budget", defaultShrinkBudget, "time for the whole search, final replays included")
	check := fs.String("check", "", "the failure to keep: a check, or contract:N for a promise (default: the first required check that failed)")
	stepList := fs.String("steps", "faults,time,clients", "what to shrink: a comma list of faults, time (sooner, shorter faults, earlier end), clients")
	dir, err := parseWithArg(fs, args)
	if err != nil {
		return exitUnknown, err
	}
	if dir == "" {
		return exitUnknown, errors.New("shrink: want a run directory (see locktest shrink --help)")
	}
	if *replays < 1 {
		return exitUnknown, fmt.Errorf("--replays must be at least 1, got %d", *replays)
	}
	if *budget <= 0 {
		return exitUnknown, fmt.Errorf("--budget must be positive, got %v", *budget)
	}
	steps, err := parseSteps(*stepList)
	if err != nil {
		return exitUnknown, err
	}
	run, done, err := loadShrinkRun(dir, *check)
	if done != "" {
		fmt.Fprintln(stdout, done)
		return exitValid, nil
	}
	if err != nil {
		return exitUnknown, fmt.Errorf("shrink: %w", err)
	}
	steps.KeepQuiet = run.target.Check == histories.CheckLiveness
	ctx, stop := signalContext()
	defer stop()
	return run.shrink(ctx, shrinkSettings{replays: *replays, budget: *budget, steps: steps}, stdout, stderr)
}

// parseWithArg parses flags given before or after the one argument a
// command takes, and returns that argument ("" if none).
func parseWithArg(fs *flag.FlagSet, args []string) (string, error) {
	arg := ""
	for {
		if err := parseFlags(fs, args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			return arg, nil
		}
		if arg != "" {
			return "", fmt.Errorf("%s: unexpected argument %q (see locktest %s --help)", fs.Name(), fs.Arg(0), fs.Name())
		}
		arg, args = fs.Arg(0), fs.Args()[1:]
	}
}

func parseSteps(s string) (shrink.Steps, error) {
	var st shrink.Steps
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "faults":
			st.Faults = true
		case "time":
			st.Time = true
		case "clients":
			st.Clients = true
		default:
			return st, fmt.Errorf("--steps: unknown step %q (want a comma list of faults, time, clients)", name)
		}
	}
	return st, nil
}

// shrinkRun is a failing run to shrink: what it recorded, and the options
// that replay it.
type shrinkRun struct {
	dir    string
	res    harness.Results
	target shrink.Target
	orig   shrink.Candidate
	seen   shrink.Observation
	base   harness.Options
	// args is the command that reproduces the run, without "locktest run".
	args []string
}

// loadShrinkRun reads the run in dir and what replays it. done, if set, is
// why there is nothing to shrink (a passing run, a scenario's scripted
// schedule); err says what is wrong with the input.
func loadShrinkRun(dir, check string) (r *shrinkRun, done string, err error) {
	r = &shrinkRun{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("%s: no results.json: not a run directory, or a run that never finished", dir)
	}
	if err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal(b, &r.res); err != nil {
		return nil, "", fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	if sc := r.res.Scenario; sc != nil {
		return nil, fmt.Sprintf("%s is a run of scenario %s: its scripted schedule is already small, each fault placed for its failure; nothing to shrink. Replay it: %s",
			dir, sc.Name, r.res.Command), nil
	}
	if r.target, err = shrink.ChooseTarget(&r.res, check); shrink.IsNoFailure(err) {
		if r.res.Exit == exitValid {
			return nil, fmt.Sprintf("%s passed (verdict %s): nothing to shrink", dir, r.res.Verdict), nil
		}
		return nil, "", fmt.Errorf("%s: no required check failed (verdict %s): nothing to shrink", dir, r.res.Verdict)
	}
	if err != nil {
		return nil, "", err
	}
	schedPath := filepath.Join(dir, "schedule.json")
	if _, err := os.Stat(schedPath); errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("%s has no schedule.json: the run had no faults to shrink", dir)
	}
	sched, err := nemesis.ReadFile(schedPath)
	if err != nil {
		return nil, "", err
	}
	if err := r.parseCommand(schedPath); err != nil {
		return nil, "", err
	}
	r.orig = shrink.Candidate{Schedule: sched, Time: r.base.Time, Quiet: r.base.Quiet, Clients: r.base.Workload.Clients}
	if r.seen, err = shrink.Observe(&r.res, filepath.Join(dir, "history.jsonl"), r.target); err != nil {
		return nil, "", err
	}
	r.seen.Dir = dir
	return r, "", nil
}

// parseCommand reads the command the run recorded into the options that
// replay it, its schedule read from sched (the run directory may have
// moved since): its words as recorded, or, for a run recorded before
// results.json kept them, its command line split as the shell that
// reproduce quoted it for.
func (r *shrinkRun) parseCommand(sched string) error {
	words := r.res.Args
	if len(words) == 0 {
		line, err := shellwords.Split(r.res.Command)
		if err != nil {
			return fmt.Errorf("%s: the recorded command %q: %w", r.dir, r.res.Command, err)
		}
		if len(line) > 0 && line[0] == "locktest" {
			words = line[1:]
		}
	}
	if len(words) < 1 || words[0] != "run" {
		return fmt.Errorf("%s: results.json records no locktest run command to replay it (%q)", r.dir, r.res.Command)
	}
	abs, err := filepath.Abs(sched)
	if err != nil {
		return err
	}
	r.args = setFlag(words[1:], "schedule", abs)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rf := addRunFlags(fs)
	if err := fs.Parse(r.args); err != nil {
		return fmt.Errorf("%s: the recorded command: %w", r.dir, err)
	}
	if r.base, err = rf.options(); err != nil {
		return fmt.Errorf("%s: the recorded command: %w", r.dir, err)
	}
	return nil
}

// setFlag sets --name to value in a command's words, adding it if absent.
func setFlag(words []string, name, value string) []string {
	out := slices.Clone(words)
	for i, w := range out {
		switch {
		case w == "--"+name && i+1 < len(out):
			out[i+1] = value
			return out
		case strings.HasPrefix(w, "--"+name+"="):
			out[i] = "--" + name + "=" + value
			return out
		}
	}
	return append(out, "--"+name, value)
}

// command is the command line that replays c with the schedule in sched.
func (r *shrinkRun) command(c shrink.Candidate, sched string) string {
	args := r.args
	for _, f := range [][2]string{{"time", c.Time.String()}, {"quiet", c.Quiet.String()}, {"clients", strconv.Itoa(c.Clients)}, {"schedule", sched}} {
		args = setFlag(args, f[0], f[1])
	}
	return "locktest run " + shellwords.Join(args)
}

type shrinkSettings struct {
	replays int
	budget  time.Duration
	steps   shrink.Steps
}

// shrinker replays candidates for the search.
type shrinker struct {
	run       *shrinkRun
	interrupt context.Context
	k         int
	work      string
	// overhead is the longest a replay took beyond its time and quiet
	// period (start, checks, close): what a replay costs the budget.
	overhead time.Duration
	replayed bool
	dirs     []string
}

// cost is how long a complete replay of c takes, at most.
func (s *shrinker) cost(c shrink.Candidate) time.Duration { return c.Time + c.Quiet + s.overhead }

// finalCost is how long the final replays of c take: one complete, the
// others ending once they fail, which its runs in the search did by the
// latest of their failures.
func (s *shrinker) finalCost(c shrink.Candidate, runs []shrink.Observation) time.Duration {
	var short time.Duration
	for _, r := range runs {
		if r.Violation > 0 {
			short = max(short, r.Violation+watchEvery+s.overhead)
		}
	}
	if short == 0 || short > s.cost(c) {
		short = s.cost(c)
	}
	return s.cost(c) + time.Duration(s.k-1)*short
}

// test is the search's oracle: up to k replays of c.
func (s *shrinker) test(ctx context.Context, c shrink.Candidate, need shrink.Need) (shrink.Outcome, error) {
	var out shrink.Outcome
	for range s.k {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < s.cost(c) {
			return out, shrink.ErrBudget
		}
		obs, err := s.replay(c, true)
		if err != nil {
			return out, err
		}
		out.Runs = append(out.Runs, obs)
		if need.Decided(out.Failed(), len(out.Runs), s.k) {
			break
		}
	}
	out.Reproduced = out.Failed() >= need.Want(s.k)
	return out, nil
}

// replay runs c once. A replay watched ends as soon as its history shows
// the failure: what comes after cannot undo it.
func (s *shrinker) replay(c shrink.Candidate, watched bool) (shrink.Observation, error) {
	o := s.run.base
	o.Time, o.Quiet, o.Workload.Clients = c.Time, c.Quiet, c.Clients
	sched := c.Schedule
	o.Schedule = &sched
	o.Shrunk = s.run.note(c)
	var err error
	if o.Dir, err = harness.NewRunDir(s.work, o.Workload.Seed); err != nil {
		return shrink.Observation{}, err
	}
	o.Args, o.Command = reproduce(o)
	ctx, stop := context.WithCancel(s.interrupt)
	watching := make(chan struct{})
	if watched {
		go s.watch(ctx, filepath.Join(o.Dir, "history.jsonl"), stop, watching)
	} else {
		close(watching)
	}
	began := time.Now()
	res, err := harness.Run(ctx, o)
	took := time.Since(began)
	stop()
	<-watching
	if err != nil {
		os.RemoveAll(o.Dir)
		if !s.replayed {
			return shrink.Observation{}, fmt.Errorf("replaying %s: %w", s.run.dir, err)
		}
		// A candidate this system cannot run does not reproduce.
		return shrink.Observation{Note: oneLine(err)}, nil
	}
	s.replayed = true
	s.dirs = append(s.dirs, o.Dir)
	if s.interrupt.Err() != nil {
		return shrink.Observation{}, s.interrupt.Err()
	}
	writeReport(io.Discard, filepath.Join(o.Dir, "report.html"), res)
	obs, err := shrink.Observe(res, res.History, s.run.target)
	if err != nil {
		return obs, err
	}
	obs.Dir = o.Dir
	s.overhead = max(s.overhead, took-c.Time-c.Quiet)
	return obs, nil
}

// watchEvery is how often a replay's history is checked for the failure
// while it runs.
const watchEvery = time.Second

// watch checks the history of a replay under way until it shows the
// failure, then stops the replay.
func (s *shrinker) watch(ctx context.Context, history string, stop func(), done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := harness.Check(history, harness.CheckOptions{Timeout: watchEvery, Required: []string{s.run.target.Check}})
		if err == nil && s.run.target.In(res.Checks) {
			stop()
			return
		}
	}
}

// note is what a run of c records of its shrinking.
func (r *shrinkRun) note(c shrink.Candidate) *harness.Shrunk {
	return &harness.Shrunk{From: r.dir, Failure: r.target.String(), Summary: shrink.Summary(r.orig, c, nil),
		Removed: shrink.Removed(r.orig, c, r.seen.Struck), Changed: shrink.Changed(r.orig, c)}
}

// shrink searches, replays the best found again, writes it and says what
// it did.
func (r *shrinkRun) shrink(ctx context.Context, set shrinkSettings, stdout, stderr io.Writer) (int, error) {
	began := time.Now()
	work, err := filepath.Abs(filepath.Join(r.dir, shrinkDir))
	if err != nil {
		return exitUnknown, err
	}
	s := &shrinker{run: r, interrupt: ctx, k: set.replays, work: work, overhead: 5 * time.Second}
	keep := ""
	defer func() { s.clean(keep) }()
	fmt.Fprintf(stdout, "locktest shrink: %s failed %s; %s; %s of each candidate, budget %s\n",
		r.dir, r.target, r.orig, words.Plural(set.replays, "replay"), set.budget)
	res := s.search(set, began, stderr)
	interrupted := ctx.Err() != nil
	switch {
	case res.NoLongerFails:
		return exitUnknown, fmt.Errorf("shrink: %s no longer fails: %s of its schedule did not fail %s (flaky from the start?)",
			r.dir, words.Plural(len(res.Original.Runs), "replay"), r.target)
	case res.Stopped != nil && !interrupted && !errors.Is(res.Stopped, shrink.ErrBudget):
		return exitUnknown, fmt.Errorf("shrink: %w", res.Stopped)
	case res.Stopped != nil && !interrupted && len(res.Attempts) == 0:
		return exitUnknown, fmt.Errorf("shrink: --budget %s leaves no time to replay %s once (about %s)", set.budget, r.dir, s.cost(r.orig))
	}
	best, final, note := res.Best, shrink.Outcome{}, ""
	if !interrupted {
		best, final, note = s.final(res, set, began, stderr)
		interrupted = ctx.Err() != nil
	}
	// The run kept: the first final replay that failed, else the search's
	// (when it kept the best).
	runs := final.Runs
	if note == "" {
		runs = slices.Concat(runs, res.Runs)
	}
	var windows []shrink.Window
	for _, o := range runs {
		if o.Failed && strings.HasPrefix(o.Dir, s.work+string(filepath.Separator)) {
			keep, windows = o.Dir, o.Struck
			break
		}
	}
	schedPath := filepath.Join(r.dir, shrunkSchedule)
	if err := best.Schedule.WriteFile(schedPath); err != nil {
		return exitUnknown, fmt.Errorf("shrink: %w", err)
	}
	// An earlier shrink's runs go with the schedule this one replaced.
	if old, err := os.ReadDir(s.work); err == nil {
		for _, e := range old {
			s.dirs = append(s.dirs, filepath.Join(s.work, e.Name()))
		}
	}
	fmt.Fprintf(stdout, "shrunk schedule: %s\n", schedPath)
	if keep != "" {
		fmt.Fprintf(stdout, "best reproduction: %s (report: %s)\n", relPath(keep), relPath(filepath.Join(keep, "report.html")))
	}
	for _, line := range shrink.Removed(r.orig, best, r.seen.Struck) {
		fmt.Fprintf(stdout, "removed: %s\n", line)
	}
	for _, line := range shrink.Changed(r.orig, best) {
		fmt.Fprintf(stdout, "changed: %s\n", line)
	}
	fmt.Fprintf(stdout, "replay: %s\n", r.command(best, schedPath))
	summary := shrink.Summary(r.orig, best, windows)
	if interrupted {
		fmt.Fprintf(stdout, "%s; interrupted: the best found so far, not replayed again\n", summary)
		return exitUnknown, nil
	}
	if note != "" {
		fmt.Fprintln(stdout, note)
	}
	want := res.Need.Want(set.replays)
	if o := res.Original; o != nil && want < set.replays {
		fmt.Fprintf(stdout, "the original schedule failed in %d of %d replays: a smaller one counted if it failed as often\n", o.Failed(), len(o.Runs))
	}
	if !slices.ContainsFunc(res.Attempts, func(a shrink.Attempt) bool { return a.Accepted }) {
		fmt.Fprintf(stdout, "could not shrink it: no smaller schedule failed in %d of %d replays\n", want, set.replays)
	}
	fmt.Fprintf(stdout, "%s; reproduced %d of %d\n", summary, final.Failed(), len(final.Runs))
	if final.Failed() == 0 {
		return exitUnknown, nil
	}
	return exitInvalid, nil
}

// final replays the best candidate again for its rate: as its replay
// command does, to the end, until one fails (the run kept); the others
// end once they fail. One that does not fail as often as the search asked
// (every time, or as often as the original) may have been lucky in the
// search: while the budget lasts, the candidates accepted before it are
// replayed, the latest first, and the first that fails as often is chosen
// (else the one that failed most often). note says so when the best was
// not chosen.
func (s *shrinker) final(res shrink.Result, set shrinkSettings, began time.Time, stderr io.Writer) (shrink.Candidate, shrink.Outcome, string) {
	// The best is the last candidate accepted, or the original.
	var chain []shrink.Candidate
	for i := len(res.Attempts) - 1; i >= 0; i-- {
		if a := res.Attempts[i]; a.Accepted {
			chain = append(chain, a.Candidate)
		}
	}
	if len(chain) == 0 {
		chain = []shrink.Candidate{res.Best}
	}
	deadline := began.Add(set.budget)
	want := res.Need.Want(set.replays)
	var (
		chosen int
		out    shrink.Outcome
		rate   = -1.0
	)
	for n, c := range chain {
		if n > 0 && time.Until(deadline) < time.Duration(set.replays)*s.cost(c) {
			break
		}
		var o shrink.Outcome
		for i := 0; i < set.replays; i++ {
			stopBar := startBar(stderr, began, set.budget, fmt.Sprintf("replaying the result: %d of %d", i+1, set.replays))
			obs, err := s.replay(c, o.Failed() > 0)
			stopBar()
			if err != nil {
				return c, o, ""
			}
			o.Runs = append(o.Runs, obs)
			if n+1 < len(chain) && o.Failed() < want && res.Need.Decided(o.Failed(), len(o.Runs), set.replays) {
				break // short of the need: another candidate is waiting
			}
		}
		if r := float64(o.Failed()) / float64(len(o.Runs)); r > rate {
			chosen, out, rate = n, o, r
		}
		fmt.Fprintf(stderr, "shrink     %6s  replayed again: %s: failed in %d of %d\n", time.Since(began).Round(time.Second), c, o.Failed(), len(o.Runs))
		if o.Failed() >= want {
			break
		}
	}
	if chosen == 0 {
		return chain[0], out, ""
	}
	return chain[chosen], out, fmt.Sprintf("the smallest schedule found (%s) did not fail in %d of %d replays again: kept an earlier one (%s)", chain[0], want, set.replays, chain[chosen])
}

// search runs the search within the budget, a line per candidate on
// stderr (and a bar while one runs, on a terminal).
func (s *shrinker) search(set shrinkSettings, began time.Time, stderr io.Writer) shrink.Result {
	ctx, cancel := context.WithDeadline(s.interrupt, began.Add(set.budget))
	defer cancel()
	stopBar := func() {}
	defer func() { stopBar() }()
	progress := func(a shrink.Attempt, done bool) {
		if !done {
			stopBar = startBar(stderr, began, set.budget, fmt.Sprintf("candidate %d: %s (%s)", a.N, a.Candidate.Step, a.Candidate))
			return
		}
		stopBar()
		stopBar = func() {}
		fmt.Fprintf(stderr, "shrink %3d %6s  %s: %s: %s\n", a.N, time.Since(began).Round(time.Second), a.Candidate.Step, a.Candidate, attemptWords(a))
	}
	return shrink.Search(ctx, s.run.orig, s.run.seen, s.test, shrink.Options{
		Steps: set.steps, Interval: s.run.base.Nemesis.Interval, Progress: progress,
		// Room for the final replays of the best: a fallback to one
		// before it is replayed only if the budget has room left then.
		Reserve: func(best shrink.Candidate, runs []shrink.Observation) time.Duration {
			return s.finalCost(best, runs)
		},
	})
}

// clean removes the runs the search made, but the one kept.
func (s *shrinker) clean(keep string) {
	for _, d := range s.dirs {
		if d != keep {
			os.RemoveAll(d)
		}
	}
	os.Remove(s.work) // only if empty
}

// attemptWords says how a candidate's replays went.
func attemptWords(a shrink.Attempt) string {
	failed, n := a.Outcome.Failed(), len(a.Outcome.Runs)
	var note string
	for _, r := range a.Outcome.Runs {
		if r.Note != "" {
			note = " (" + r.Note + ")"
		}
	}
	switch {
	case a.Accepted:
		return fmt.Sprintf("reproduced in %d of %d: kept", failed, n)
	case a.Outcome.Reproduced:
		return fmt.Sprintf("failed in %d of %d", failed, n)
	}
	return fmt.Sprintf("not reproduced (failed in %d of %d)%s", failed, n, note)
}
