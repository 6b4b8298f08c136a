package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/shrink"
)

// Defaults of locktest shrink.
const (
	defaultReplays      = 3
	defaultShrinkBudget = 10 * time.Minute
)

func shrinkCmd(bs *backend.Set, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlags("shrink", "shrink RUNDIR [flags]\n\nSearches for a smaller fault schedule that still makes a failing run fail the same way (the\nsame check invalid; for contract, the same promise): fewer faults first, then faults that\nstart sooner and last less and an earlier end, then fewer clients. A candidate counts only\nif every one of its replays fails (or, when the original schedule itself failed in only some of\nas many replays, if it fails as often); the smallest is replayed again at the end. Writes\nRUNDIR/"+shrink.ScheduleFile+" and keeps the best reproduction's run directory under\nRUNDIR/"+shrink.WorkDir+"/ (replacing an earlier shrink's); Ctrl-C keeps the best found so far.\nExit status: 1 the failure reproduced, 0 nothing to shrink (a run that held, a scenario's\nscripted schedule), 2 an error, a schedule that no longer fails, or an interrupted search.", stdout)
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
	run, args, done, err := loadShrinkRun(bs, dir, *check)
	if done != "" {
		fmt.Fprintln(stdout, done)
		return exitValid, nil
	}
	if err != nil {
		return exitUnknown, fmt.Errorf("shrink: %w", err)
	}
	ctx, stop := signalContext()
	defer stop()
	return shrinkRun(ctx, run, args, shrink.Settings{Replays: *replays, Budget: *budget, Steps: steps}, stdout, stderr)
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

// loadShrinkRun reads the run in dir (see shrink.Load), its recorded command
// parsed with run's flags; args are that command's words after "locktest
// run", its --schedule the run's.
func loadShrinkRun(bs *backend.Set, dir, check string) (run *shrink.Run, args []string, done string, err error) {
	run, done, err = shrink.Load(dir, check, func(res *harness.Results, sched string) (harness.Options, error) {
		var o harness.Options
		var err error
		args, o, err = recordedCommand(bs, dir, res, sched)
		return o, err
	})
	return run, args, done, err
}

// recordedCommand reads the command the run in dir recorded (res) into the
// options that replay it, its schedule read from sched (the run directory
// may have moved since): its words as recorded, or, for a run recorded
// before results.json kept them, its command line split as the shell that
// reproduce quoted it for. args are the words after "locktest run", with
// --schedule sched.
func recordedCommand(bs *backend.Set, dir string, res *harness.Results, sched string) (args []string, o harness.Options, err error) {
	line := res.Args
	if len(line) == 0 {
		split, err := shellwords.Split(res.Command)
		if err != nil {
			return nil, o, fmt.Errorf("%s: the recorded command %q: %w", dir, res.Command, err)
		}
		if len(split) > 0 && split[0] == "locktest" {
			line = split[1:]
		}
	}
	if len(line) < 1 || line[0] != "run" {
		return nil, o, fmt.Errorf("%s: results.json records no locktest run command to replay it (%q)", dir, res.Command)
	}
	args = setFlag(line[1:], "schedule", sched)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rf := addRunFlags(fs, bs)
	if err := fs.Parse(args); err != nil {
		return nil, o, fmt.Errorf("%s: the recorded command: %w", dir, err)
	}
	if o, err = rf.options(); err != nil {
		return nil, o, fmt.Errorf("%s: the recorded command: %w", dir, err)
	}
	return args, o, nil
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

// replayCommand is the command line that replays c with the schedule in
// sched, from the recorded command's args.
func replayCommand(args []string, c shrink.Candidate, sched string) string {
	for _, f := range [][2]string{{"time", c.Time.String()}, {"quiet", c.Quiet.String()}, {"clients", strconv.Itoa(c.Clients)}, {"schedule", sched}} {
		args = setFlag(args, f[0], f[1])
	}
	return "locktest run " + shellwords.Join(args)
}

// shrinkRun shrinks run (args: its recorded command's words), a line per
// candidate on stderr (and a bar while one runs, on a terminal), and says
// what it found on stdout.
func shrinkRun(ctx context.Context, run *shrink.Run, args []string, set shrink.Settings, stdout, stderr io.Writer) (int, error) {
	began := time.Now()
	fmt.Fprintf(stdout, "locktest shrink: %s failed %s; %s; %s of each candidate, budget %s\n",
		run.Dir, run.Target, run.Orig, words.Plural(set.Replays, "replay"), set.Budget)
	stopBar := func() {}
	defer func() { stopBar() }()
	set.Progress = func(a shrink.Attempt, done bool) {
		if !done {
			stopBar = startBar(stderr, began, set.Budget, fmt.Sprintf("candidate %d: %s (%s)", a.N, a.Candidate.Step, a.Candidate))
			return
		}
		stopBar()
		stopBar = func() {}
		fmt.Fprintf(stderr, "shrink %3d %6s  %s: %s: %s\n", a.N, time.Since(began).Round(time.Second), a.Candidate.Step, a.Candidate, attemptWords(a))
	}
	set.Replaying = func(i, n int) func() {
		return startBar(stderr, began, set.Budget, fmt.Sprintf("replaying the result: %d of %d", i, n))
	}
	set.ReplayedAgain = func(c shrink.Candidate, o shrink.Outcome) {
		fmt.Fprintf(stderr, "shrink     %6s  replayed again: %s: failed in %d of %d\n", time.Since(began).Round(time.Second), c, o.Failed(), len(o.Runs))
	}
	// Each replay runs on the servers (harness.Run), or on the fake
	// system a test gives in set.Replay.
	replay := set.Replay
	if replay == nil {
		replay = harness.Run
	}
	set.Replay = func(ctx context.Context, o harness.Options) (*harness.Results, error) {
		res, err := replay(ctx, o)
		if err == nil {
			writeReport(io.Discard, filepath.Join(o.Dir, "report.html"), res)
		}
		return res, err
	}
	out, err := run.Shrink(ctx, set)
	if err != nil {
		return exitUnknown, fmt.Errorf("shrink: %w", err)
	}
	fmt.Fprintf(stdout, "shrunk schedule: %s\n", out.Schedule)
	if out.Kept != "" {
		fmt.Fprintf(stdout, "best reproduction: %s (report: %s)\n", relPath(out.Kept), relPath(filepath.Join(out.Kept, "report.html")))
	}
	for _, line := range shrink.Removed(run.Orig, out.Best, run.Seen.Struck) {
		fmt.Fprintf(stdout, "removed: %s\n", line)
	}
	for _, line := range shrink.Changed(run.Orig, out.Best) {
		fmt.Fprintf(stdout, "changed: %s\n", line)
	}
	fmt.Fprintf(stdout, "replay: %s\n", replayCommand(args, out.Best, out.Schedule))
	summary := shrink.Summary(run.Orig, out.Best, out.Windows)
	if out.Interrupted {
		fmt.Fprintf(stdout, "%s; interrupted: the best found so far, not replayed again\n", summary)
		return exitUnknown, nil
	}
	if out.Note != "" {
		fmt.Fprintln(stdout, out.Note)
	}
	res := out.Search
	want := res.Need.Want(set.Replays)
	if o := res.Original; o != nil && want < set.Replays {
		fmt.Fprintf(stdout, "the original schedule failed in %d of %d replays: a smaller one counted if it failed as often\n", o.Failed(), len(o.Runs))
	}
	if !slices.ContainsFunc(res.Attempts, func(a shrink.Attempt) bool { return a.Accepted }) {
		fmt.Fprintf(stdout, "could not shrink it: no smaller schedule failed in %d of %d replays\n", want, set.Replays)
	}
	fmt.Fprintf(stdout, "%s; reproduced %d of %d\n", summary, out.Final.Failed(), len(out.Final.Runs))
	if out.Final.Failed() == 0 {
		return exitUnknown, nil
	}
	return exitInvalid, nil
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
