package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// Defaults of a plain `locktest run`: faults that break the lock's own mutual
// exclusion, and a fenced resource that stays safe.
const (
	defaultNemesis = "pause,lease,isolate"
	defaultTime    = 15 * time.Second
)

// livenessBoundUsage is --liveness-bound's help, for run and check.
const livenessBoundUsage = "after the final heal, the longest the lock may stay idle (nobody holding it, nobody granted it) while a client asks for it"

// runFlags are the flags run and sweep share: locktest's own, and every
// backend's (backends).
type runFlags struct {
	fs           *flag.FlagSet
	clients      *string
	locks        *int
	members      *int
	runTime      *time.Duration
	seed         *int64
	out          *string
	mode         *string
	require      *string
	guard        *string
	ttl          *int
	thinkMax     *time.Duration
	thinkMin     *time.Duration
	slowShare    *float64
	slowThink    *string
	opTimeout    *time.Duration
	faults       *string
	interval     *time.Duration
	durations    *string
	mix          *string
	quiet        *time.Duration
	schedule     *string
	steer        *string
	checkTimeout *time.Duration
	bound        *time.Duration
	recipe       *string
	backend      *string
	execClock    *string
	work         *string
	items        *int
	backends     *backend.Flags
	// backendSet is the backends the runs may be on: locktest's own, or a
	// test's (the fake backend, for the CLI's own logic).
	backendSet *backend.Set
	// lenient lets a backend's flags be set for runs of another's recipes
	// (compare runs several backends: each backend's flags apply to its
	// own recipes); else they are refused.
	lenient bool
	// seedDrawn is set once a seed not given on the command line has been
	// drawn, so that every run built from these flags (compare) shares it.
	seedDrawn bool
}

func addRunFlags(fs *flag.FlagSet, bs *backend.Set) *runFlags {
	def := workload.DefaultConfig()
	return &runFlags{
		fs:           fs,
		backendSet:   bs,
		clients:      fs.String("clients", strconv.Itoa(def.Clients), "number of contending clients"),
		locks:        fs.Int("locks", len(def.Locks), "number of distinct locks the clients contend for"),
		members:      fs.Int("members", 3, "number of members (servers) of the system under test, where its backend lets it be chosen: 3 or 5"),
		runTime:      fs.Duration("time", defaultTime, "how long clients contend under faults; then faults are healed and a quiet period follows"),
		seed:         fs.Int64("seed", 0, "seed for every random choice (default: drawn from the clock, and printed)"),
		out:          fs.String("out", "runs", "directory under which each run's directory is created"),
		mode:         fs.String("resource", string(resource.Fenced), "protected resource: "+bs.ResourceHelp()),
		require:      fs.String("require", harness.RequireData, "checks whose failure makes the exit status 1: a comma list of "+strings.Join(checker.Names(), ", ")+", all, or "+harness.RequireData+" (resource, and invariant unless it is unknown)"),
		guard:        fs.String("guard", workload.GuardNone, "what a holder checks just before writing: none, session (its session is alive) or clock (its lease has time left on its own clock)"),
		ttl:          fs.Int("ttl", def.TTL, "session lease TTL in seconds"),
		thinkMax:     fs.Duration("think", def.ThinkMax, "longest think time between a holder's read and write (drawn uniformly from --think-min)"),
		thinkMin:     fs.Duration("think-min", def.ThinkMin, "shortest think time between a holder's read and write"),
		slowShare:    fs.Float64("slow-share", def.SlowShare, "share of critical sections that are slow (as sections that call another service), 0 to 1"),
		slowThink:    fs.String("slow-think", "", "think time range of slow sections, MIN-MAX (default: TTL to 2 TTL; with --guard clock, TTL/4 to what the guard lets write)"),
		opTimeout:    fs.Duration("op-timeout", def.OpTimeout, "time limit of each acquire, read, write and release"),
		faults:       fs.String("nemesis", defaultNemesis, "faults: a comma list of "+strings.Join(nemesis.Categories(), ", ")+", or all, or none"),
		interval:     fs.Duration("nemesis-interval", nemesis.DefaultInterval, "quiet time before each fault"),
		durations:    fs.String("fault-durations", "", "fault durations, e.g. pause=3s-5s,partition=2s-4s (kinds: "+strings.Join(nemesis.Categories(), ", ")+")"),
		mix:          fs.String("nemesis-mix", nemesis.DefaultMix, "how a schedule draws its faults: even (every family alike), or a comma list of swarm (each seed draws from a random half of the families), aim (half the client faults that end a lease strike a waiter queued behind a long section, half the lost acquire replies the holder's next acquire, lost release replies the holder's release, lost renewal replies the holder's release or next acquire, a holder whose release reply is lost has its next section held open, a schedule opens with one strike per class: for a session lock in a process of its own on a cluster (an exec: lock on ZooKeeper), the whole cluster crashed for half a TTL behind a fresh queue, and restarted together, the holder's release held until its client is back; then, for a session lock in a process of its own (on a cluster or not), a waiter's links cut briefly, under half a TTL, across the moment its acquire gives up, begun since the fault before, the holder's release held until the cut ends; where leases can be revoked, the lease of a holder with work ahead, the lease of the waiter first in line ended as a section begins, and the holder's lost release reply; elsewhere the lost release reply, then the waiter's; then the holder's release whose request is lost too; then, where clock steps are offered, the clock of the client that began to wait last stepped past a TTL ahead while the holder works; then a lost acquire reply (its first on a client's request, else the holder's); and a run's first pause strikes the holder, at once if it is mid-section) and dense (each fault, the first too, after a quarter of --nemesis-interval, and each family drawn by its share of the run's time, so that short faults come often)"),
		quiet:        fs.Duration("quiet", harness.DefaultQuiet, "how long clients go on after the final heal (liveness is judged there; keep it above --liveness-bound)"),
		schedule:     fs.String("schedule", "", "replay the fault schedule in this file (a run's schedule.json) instead of drawing one"),
		steer:        fs.String("steer", "", "cells (lock state × fault, a comma list of STATE×FAULT or STATE/FAULT) that the schedule's first faults are drawn to strike, in order: how nightly steers a random run toward cells not yet struck"),
		checkTimeout: fs.Duration("check-timeout", time.Minute, "time limit for each check; a check that hits it is unknown"),
		bound:        fs.Duration("liveness-bound", harness.DefaultLivenessBound, livenessBoundUsage),
		recipe: fs.String("recipe", bs.Default().Recipes[0].Name, "lock recipe under test: "+strings.Join(bs.RecipeNames(), ", ")+
			", or "+execlock.Prefix+"'COMMAND ARGS…': a lock in a process of its own, started for each client, speaking locktest's lock-client protocol (lock/execlock/README.md)"),
		backend: fs.String("backend", "", "backend (lock service) of a recipe that is not a built-in ("+execlock.Prefix+"…): "+strings.Join(bs.Names(), ", ")+
			" (default "+bs.Default().Name+"); a built-in recipe runs on its own"),
		execClock: fs.String("exec-clock", "auto", "with an "+execlock.Prefix+" recipe, how clock faults reach the client's clock: auto (libfaketime where the runtime honours it: Node, Java), libfaketime (always) or none (clock faults refused)"),
		work:      fs.String("workload", histories.WorkloadCounter, "critical section: counter (read, write value+1) or stock (sell one of --items if any is left)"),
		items:     fs.Int("items", workload.DefaultItems, "initial stock per key of the stock workload"),
		backends:  bs.AddFlags(fs),
	}
}

// options turns the flags into harness options, or says what is wrong.
// The workload settings are checked where the run is planned
// (harness.NewPlan), after a scenario's settings may have come over them.
func (f *runFlags) options() (harness.Options, error) {
	if !f.set("seed") && !f.seedDrawn {
		*f.seed = time.Now().UnixNano() % 1_000_000
		f.seedDrawn = true
	}
	clients, err := strconv.Atoi(*f.clients)
	if err != nil {
		return harness.Options{}, fmt.Errorf("--clients: want a number, got %q", *f.clients)
	}
	wc := workload.DefaultConfig()
	wc.Clients, wc.TTL, wc.ThinkMin, wc.ThinkMax, wc.OpTimeout, wc.Seed, wc.Guard = clients, *f.ttl, *f.thinkMin, *f.thinkMax, *f.opTimeout, *f.seed, *f.guard
	if *f.locks < 1 {
		return harness.Options{}, fmt.Errorf("--locks must be at least 1, got %d", *f.locks)
	}
	wc.SlowShare = *f.slowShare
	if *f.slowThink != "" {
		lo, hi, ok := strings.Cut(*f.slowThink, "-")
		wc.SlowMin, err = time.ParseDuration(lo)
		if err == nil {
			wc.SlowMax, err = time.ParseDuration(hi)
		}
		if !ok || err != nil {
			return harness.Options{}, fmt.Errorf("--slow-think: want MIN-MAX durations, got %q", *f.slowThink)
		}
	}
	wc.Locks = lockNames(*f.locks)
	wc.Workload, wc.Items = *f.work, *f.items
	b, err := f.backendSet.For(*f.recipe, *f.backend)
	if err != nil {
		return harness.Options{}, err
	}
	system, err := f.backends.OptionsOf(b, *f.recipe, !f.lenient)
	if err != nil {
		return harness.Options{}, err
	}
	if wc.Recipe, err = f.newRecipe(system); err != nil {
		return harness.Options{}, fmt.Errorf("--recipe: %w", err)
	}
	o := harness.Options{
		Backends: f.backendSet, System: system, Backend: b.Name, Workload: wc, Time: *f.runTime, Quiet: *f.quiet, CheckTimeout: *f.checkTimeout, LivenessBound: *f.bound,
	}
	if f.set("members") {
		o.Members = *f.members
	}
	for name, d := range map[string]time.Duration{"time": *f.runTime, "check-timeout": *f.checkTimeout, "liveness-bound": *f.bound, "nemesis-interval": *f.interval} {
		if d <= 0 {
			return o, fmt.Errorf("--%s must be positive, got %v", name, d)
		}
	}
	if *f.quiet < 0 {
		return o, fmt.Errorf("--quiet must not be negative, got %v", *f.quiet)
	}
	mode, err := f.backendSet.ParseResource(*f.mode)
	if err != nil {
		return o, fmt.Errorf("--resource: %w", err)
	}
	o.Resource = mode
	if o.Required, err = harness.ParseRequire(*f.require); err != nil {
		return o, err
	}
	if o.Nemesis.Faults, err = nemesis.ParseFaults(*f.faults); err != nil {
		return o, fmt.Errorf("--nemesis: %w", err)
	}
	o.DefaultFaults = !f.set("nemesis")
	o.Nemesis.Interval = *f.interval
	if err := o.Nemesis.ParseMix(*f.mix); err != nil {
		return o, fmt.Errorf("--nemesis-mix: %w", err)
	}
	if o.Nemesis.Durations, err = nemesis.ParseDurations(*f.durations); err != nil {
		return o, fmt.Errorf("--fault-durations: %w", err)
	}
	if o.Nemesis.Steer, err = nemesis.ParseCells(*f.steer); err != nil {
		return o, fmt.Errorf("--steer: %w", err)
	}
	if *f.schedule != "" {
		s, err := nemesis.ReadFile(*f.schedule)
		if err != nil {
			return o, fmt.Errorf("--schedule: %w", err)
		}
		o.Schedule = &s
	}
	return o, nil
}

// newRecipe makes --recipe's recipe: a built-in, as its backend's options
// make it, or a lock in a process of its own (exec:).
func (f *runFlags) newRecipe(system backend.Options) (lock.Recipe, error) {
	if !execlock.IsSpec(*f.recipe) {
		if _, _, ok := f.backendSet.Builtin(*f.recipe); !ok {
			return nil, fmt.Errorf("unknown lock recipe %q%s (want one of %s, or %sCOMMAND ARGS…)", *f.recipe, words.DidYouMean(*f.recipe, f.backendSet.RecipeNames()), strings.Join(f.backendSet.RecipeNames(), ", "), execlock.Prefix)
		}
		if f.set("exec-clock") && !f.lenient {
			return nil, fmt.Errorf("--exec-clock is for %s recipes, not %s", execlock.Prefix, *f.recipe)
		}
		return f.backendSet.NewRecipe(*f.recipe, system)
	}
	r, err := execlock.Parse(*f.recipe)
	if err != nil {
		return nil, err
	}
	if r.Clock, err = execlock.ParseClock(*f.execClock); err != nil {
		return nil, fmt.Errorf("--exec-clock: %w", err)
	}
	return r, nil
}

// set reports whether the command line gave flag name.
func (f *runFlags) set(name string) bool {
	found := false
	f.fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

func lockNames(n int) []string {
	if n == 1 {
		return []string{"lock"}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("lock-%d", i)
	}
	return names
}

// signalContext is cancelled by Ctrl-C or SIGTERM, so a run stops, keeps its
// history and checks it.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runCmd(bs *backend.Set, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("run", "run [flags]\n\nStarts the servers of the recipe's backend behind toxiproxy, lets clients contend for locks\nand write to a protected resource under faults, records every operation and checks the history.", stdout)
	rf := addRunFlags(fs, bs)
	lf := addLiveFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return exitUnknown, err
	}
	if fs.NArg() > 0 {
		return exitUnknown, fmt.Errorf("run: unexpected argument %q (see locktest run --help)", fs.Arg(0))
	}
	o, err := rf.options()
	if err != nil {
		return exitUnknown, fmt.Errorf("run: %w", err)
	}
	p, err := harness.NewPlan(o)
	if err != nil {
		return exitUnknown, fmt.Errorf("run: %w", err)
	}
	return runOne(p, rf, lf, stdout)
}

// runOne carries out one planned run and prints its verdicts; with
// --live (lf), it serves the run's live page as it goes, and its report
// after it until Ctrl-C.
func runOne(p *harness.Plan, rf *runFlags, lf *liveFlags, stdout io.Writer) (int, error) {
	l, err := startLive(lf, rf.backendSet)
	if err != nil {
		return exitUnknown, err
	}
	if p.Dir, err = harness.NewRunDir(*rf.out, p.Workload.Seed); err != nil {
		l.close()
		return exitUnknown, err
	}
	p.Log = stdout
	faults := "no faults"
	if len(p.Nemesis.Faults) > 0 {
		faults = "faults " + strings.Join(p.Nemesis.Faults, ",")
	}
	if p.Scenario != nil {
		faults = "scenario " + p.Scenario.Name
	}
	fmt.Fprintf(stdout, "locktest run: seed %d, recipe %s, %s workload, %d clients, %d lock(s), resource %s, guard %s, %s for %s (run directory %s)\n",
		p.Workload.Seed, *rf.recipe, p.Workload.Workload, p.Workload.Clients, len(p.Workload.Locks), p.Resource, p.Workload.Guard, faults, p.Time, relPath(p.Dir))
	if sc := p.Scenario; sc != nil {
		fmt.Fprintf(stdout, "lesson: %s\nexpected: %s\n", sc.Lesson, sc.ExpectText())
	}

	if l != nil {
		if err := l.serve(stdout, *rf.out, p.Dir); err != nil {
			os.RemoveAll(p.Dir)
			return exitUnknown, fmt.Errorf("--live: %w", err)
		}
	}
	ctx, stop := signalContext()
	defer stop()
	res, err := p.Run(ctx)
	if err != nil {
		// Nothing was recorded: leave no run directory behind, but for
		// the servers' logs the error may point at.
		l.close()
		if logs := harness.Discard(p.Dir); logs != "" {
			fmt.Fprintf(stdout, "servers' logs kept in %s\n", relPath(logs))
		}
		return exitUnknown, err
	}
	printSummary(stdout, res)
	writeReport(stdout, filepath.Join(p.Dir, "report.html"), res)
	if cmd := shrinkHint(p.Options, res); cmd != "" {
		fmt.Fprintf(stdout, "shrink: %s\n", cmd)
	}
	code, why := scenarioExit(res)
	if why != "" {
		fmt.Fprintln(stdout, why)
	}
	l.keep(stdout)
	return code, nil
}

// scenarioExit is the exit status of a scenario run (harness.Scenario's
// Exit: by its expectations, what a CI job wants of a scenario; nightly
// judges its scenario runs so too), and why, when it is not the run's own.
func scenarioExit(res *harness.Results) (int, string) {
	sc := res.Scenario
	if sc == nil || sc.Exit == nil {
		return res.Exit, ""
	}
	code := *sc.Exit
	if code == res.Exit {
		return code, ""
	}
	what := map[int]string{exitValid: "its verdicts are the ones it expects", exitInvalid: "a verdict is not the one it expects", exitUnknown: "a verdict it expects is unknown"}[code]
	return code, fmt.Sprintf("exit %d: %s (a scenario exits on its expectations; the run's own verdict, %s, would exit %d)", code, what, res.Verdict, res.Exit)
}

// shrinkHint is the command that shrinks a failed run's random schedule,
// or "" when there is none to shrink (a run that held, no faults, a
// scenario's scripted schedule).
func shrinkHint(o harness.Options, res *harness.Results) string {
	if res.Exit != exitInvalid || o.Scenario != nil || res.Run == nil || res.Run.Schedule == "" {
		return ""
	}
	return "locktest shrink " + relPath(o.Dir)
}
