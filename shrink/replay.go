// Shrinking a recorded run: its directory read, the search's oracle as real
// replays of the run's options, the result replayed again for its rate,
// the shrunk schedule written and the replays' runs cleaned up. The caller
// says how to read the recorded command into options, and shows progress.

package shrink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/nemesis"
)

// ScheduleFile is the file a shrink writes in the run directory, and
// WorkDir where the replays' runs go.
const (
	ScheduleFile = "shrunk.schedule.json"
	WorkDir      = "shrink"
)

// Run is a failing run to shrink: what it recorded, and the options that
// replay it.
type Run struct {
	Dir     string
	Results harness.Results
	Target  Target
	Orig    Candidate
	Seen    Observation
	Base    harness.Options
}

// Replaying reads the options that replay a run from the results it
// recorded (its command), with the schedule in sched (an absolute path).
type Replaying func(res *harness.Results, sched string) (harness.Options, error)

// Load reads the run in dir and what replays it; check is the failure to
// keep (see ChooseTarget). done, if set, is why there is nothing to shrink
// (a passing run, a scenario's scripted schedule); err says what is wrong
// with the input.
func Load(dir, check string, replaying Replaying) (r *Run, done string, err error) {
	r = &Run{Dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("%s: no results.json: not a run directory, or a run that never finished", dir)
	}
	if err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal(b, &r.Results); err != nil {
		return nil, "", fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	if sc := r.Results.Scenario; sc != nil {
		return nil, fmt.Sprintf("%s is a run of scenario %s: its scripted schedule is already small, each fault placed for its failure; nothing to shrink. Replay it: %s",
			dir, sc.Name, r.Results.Command), nil
	}
	if r.Target, err = ChooseTarget(&r.Results, check); IsNoFailure(err) {
		if r.Results.Exit == harness.ExitValid {
			return nil, fmt.Sprintf("%s passed (verdict %s): nothing to shrink", dir, r.Results.Verdict), nil
		}
		return nil, "", fmt.Errorf("%s: no required check failed (verdict %s): nothing to shrink", dir, r.Results.Verdict)
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
	abs, err := filepath.Abs(schedPath)
	if err != nil {
		return nil, "", err
	}
	if r.Base, err = replaying(&r.Results, abs); err != nil {
		return nil, "", err
	}
	r.Orig = Candidate{Schedule: sched, Time: r.Base.Time, Quiet: r.Base.Quiet, Clients: r.Base.Workload.Clients}
	if r.Seen, err = Observe(&r.Results, filepath.Join(dir, "history.jsonl"), r.Target); err != nil {
		return nil, "", err
	}
	r.Seen.Dir = dir
	return r, "", nil
}

// Settings tune Shrink, and let the caller run each replay and show the
// progress.
type Settings struct {
	Replays int
	Budget  time.Duration
	Steps   Steps
	// Replay runs one replay's options and checks it; nil: harness.Run.
	// The caller's may record its command line and write its report.
	Replay func(ctx context.Context, o harness.Options) (*harness.Results, error)
	// Progress, if set, hears of each candidate of the search as it starts
	// (done false) and once it is judged.
	Progress func(a Attempt, done bool)
	// Replaying, if set, hears that the i-th of n replays of the result
	// starts; it returns what to call when that replay ends.
	Replaying func(i, n int) (ended func())
	// ReplayedAgain, if set, hears how a candidate's replays of the result
	// went.
	ReplayedAgain func(c Candidate, o Outcome)
}

// Shrunk is what Shrink found and did.
type Shrunk struct {
	// Search is the search's result.
	Search Result
	// Best is the candidate kept, Final its replays again (none when
	// interrupted), Note why an earlier candidate than the search's best
	// was kept ("" when it was not).
	Best  Candidate
	Final Outcome
	Note  string
	// Kept is the directory of the replay kept, the best reproduction (""
	// when none failed), and Windows its faults' windows.
	Kept    string
	Windows []Window
	// Schedule is the shrunk schedule's path.
	Schedule string
	// Interrupted says ctx ended first: Best is the best found so far,
	// not replayed again.
	Interrupted bool
}

// Shrink searches for a smaller schedule that still fails r so, replays
// the best found again, writes it (ScheduleFile in the run directory) and
// keeps the best reproduction's run under WorkDir, removing the other
// replays' runs (and an earlier shrink's). ctx ending is an interruption:
// the best so far is written. The error says why there is no result: a
// schedule that no longer fails, a budget too small for one replay, a
// replay that could not run.
func (r *Run) Shrink(ctx context.Context, set Settings) (Shrunk, error) {
	began := time.Now()
	work, err := filepath.Abs(filepath.Join(r.Dir, WorkDir))
	if err != nil {
		return Shrunk{}, err
	}
	if set.Replay == nil {
		set.Replay = harness.Run
	}
	set.Steps.KeepQuiet = r.Target.Check == histories.CheckLiveness
	s := &shrinker{run: r, set: set, interrupt: ctx, work: work, overhead: 5 * time.Second}
	var out Shrunk
	defer func() { s.clean(out.Kept) }()
	res := s.search(began)
	out.Search = res
	interrupted := ctx.Err() != nil
	switch {
	case res.NoLongerFails:
		return out, fmt.Errorf("%s no longer fails: %s of its schedule did not fail %s (flaky from the start?)",
			r.Dir, words.Plural(len(res.Original.Runs), "replay"), r.Target)
	case res.Stopped != nil && !interrupted && !errors.Is(res.Stopped, ErrBudget):
		return out, res.Stopped
	case res.Stopped != nil && !interrupted && len(res.Attempts) == 0:
		return out, fmt.Errorf("--budget %s leaves no time to replay %s once (about %s)", set.Budget, r.Dir, s.cost(r.Orig))
	}
	out.Best = res.Best
	if !interrupted {
		out.Best, out.Final, out.Note = s.final(res, began)
		interrupted = ctx.Err() != nil
	}
	out.Interrupted = interrupted
	// The run kept: the first final replay that failed, else the search's
	// (when it kept the best).
	runs := out.Final.Runs
	if out.Note == "" {
		runs = slices.Concat(runs, res.Runs)
	}
	for _, o := range runs {
		if o.Failed && strings.HasPrefix(o.Dir, s.work+string(filepath.Separator)) {
			out.Kept, out.Windows = o.Dir, o.Struck
			break
		}
	}
	out.Schedule = filepath.Join(r.Dir, ScheduleFile)
	if err := out.Best.Schedule.WriteFile(out.Schedule); err != nil {
		return out, err
	}
	// An earlier shrink's runs go with the schedule this one replaced.
	if old, err := os.ReadDir(s.work); err == nil {
		for _, e := range old {
			s.dirs = append(s.dirs, filepath.Join(s.work, e.Name()))
		}
	}
	return out, nil
}

// shrinker replays candidates for the search.
type shrinker struct {
	run       *Run
	set       Settings
	interrupt context.Context
	work      string
	// overhead is the longest a replay took beyond its time and quiet
	// period (start, checks, close): what a replay costs the budget.
	overhead time.Duration
	replayed bool
	dirs     []string
}

// cost is how long a complete replay of c takes, at most.
func (s *shrinker) cost(c Candidate) time.Duration { return c.Time + c.Quiet + s.overhead }

// finalCost is how long the final replays of c take: one complete, the
// others ending once they fail, which its runs in the search did by the
// latest of their failures.
func (s *shrinker) finalCost(c Candidate, runs []Observation) time.Duration {
	var short time.Duration
	for _, r := range runs {
		if r.Violation > 0 {
			short = max(short, r.Violation+watchEvery+s.overhead)
		}
	}
	if short == 0 || short > s.cost(c) {
		short = s.cost(c)
	}
	return s.cost(c) + time.Duration(s.set.Replays-1)*short
}

// test is the search's oracle: up to Replays replays of c.
func (s *shrinker) test(ctx context.Context, c Candidate, need Need) (Outcome, error) {
	var out Outcome
	k := s.set.Replays
	for range k {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < s.cost(c) {
			return out, ErrBudget
		}
		obs, err := s.replay(c, true)
		if err != nil {
			return out, err
		}
		out.Runs = append(out.Runs, obs)
		if need.Decided(out.Failed(), len(out.Runs), k) {
			break
		}
	}
	out.Reproduced = out.Failed() >= need.Want(k)
	return out, nil
}

// replay runs c once. A replay watched ends as soon as its history shows
// the failure: what comes after cannot undo it.
func (s *shrinker) replay(c Candidate, watched bool) (Observation, error) {
	o := s.run.Base
	o.Time, o.Quiet, o.Workload.Clients = c.Time, c.Quiet, c.Clients
	sched := c.Schedule
	o.Schedule = &sched
	o.Shrunk = s.run.note(c)
	var err error
	if o.Dir, err = harness.NewRunDir(s.work, o.Workload.Seed); err != nil {
		return Observation{}, err
	}
	ctx, stop := context.WithCancel(s.interrupt)
	watching := make(chan struct{})
	if watched {
		go s.watch(ctx, filepath.Join(o.Dir, "history.jsonl"), stop, watching)
	} else {
		close(watching)
	}
	began := time.Now()
	res, err := s.set.Replay(ctx, o)
	took := time.Since(began)
	stop()
	<-watching
	if err != nil {
		os.RemoveAll(o.Dir)
		if !s.replayed {
			return Observation{}, fmt.Errorf("replaying %s: %w", s.run.Dir, err)
		}
		// A candidate this system cannot run does not reproduce.
		return Observation{Note: words.OneLine(err)}, nil
	}
	s.replayed = true
	s.dirs = append(s.dirs, o.Dir)
	if s.interrupt.Err() != nil {
		return Observation{}, s.interrupt.Err()
	}
	obs, err := Observe(res, res.History, s.run.Target)
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
		res, err := harness.Check(history, harness.CheckOptions{Backends: s.run.Base.Backends, Timeout: watchEvery, Required: []string{s.run.Target.Check}})
		if err == nil && s.run.Target.In(res.Checks) {
			stop()
			return
		}
	}
}

// note is what a run of c records of its shrinking.
func (r *Run) note(c Candidate) *harness.Shrunk {
	return &harness.Shrunk{From: r.Dir, Failure: r.Target.String(), Summary: Summary(r.Orig, c, nil),
		Removed: Removed(r.Orig, c, r.Seen.Struck), Changed: Changed(r.Orig, c)}
}

// final replays the best candidate again for its rate: as its replay
// command does, to the end, until one fails (the run kept); the others
// end once they fail. One that does not fail as often as the search asked
// (every time, or as often as the original) may have been lucky in the
// search: while the budget lasts, the candidates accepted before it are
// replayed, the latest first, and the first that fails as often is chosen
// (else the one that failed most often). note says so when the best was
// not chosen.
func (s *shrinker) final(res Result, began time.Time) (Candidate, Outcome, string) {
	// The best is the last candidate accepted, or the original.
	var chain []Candidate
	for i := len(res.Attempts) - 1; i >= 0; i-- {
		if a := res.Attempts[i]; a.Accepted {
			chain = append(chain, a.Candidate)
		}
	}
	if len(chain) == 0 {
		chain = []Candidate{res.Best}
	}
	k := s.set.Replays
	deadline := began.Add(s.set.Budget)
	want := res.Need.Want(k)
	var (
		chosen int
		out    Outcome
		rate   = -1.0
	)
	for n, c := range chain {
		if n > 0 && time.Until(deadline) < time.Duration(k)*s.cost(c) {
			break
		}
		var o Outcome
		for i := 0; i < k; i++ {
			ended := func() {}
			if s.set.Replaying != nil {
				ended = s.set.Replaying(i+1, k)
			}
			obs, err := s.replay(c, o.Failed() > 0)
			ended()
			if err != nil {
				return c, o, ""
			}
			o.Runs = append(o.Runs, obs)
			if n+1 < len(chain) && o.Failed() < want && res.Need.Decided(o.Failed(), len(o.Runs), k) {
				break // short of the need: another candidate is waiting
			}
		}
		if r := float64(o.Failed()) / float64(len(o.Runs)); r > rate {
			chosen, out, rate = n, o, r
		}
		if s.set.ReplayedAgain != nil {
			s.set.ReplayedAgain(c, o)
		}
		if o.Failed() >= want {
			break
		}
	}
	if chosen == 0 {
		return chain[0], out, ""
	}
	return chain[chosen], out, fmt.Sprintf("the smallest schedule found (%s) did not fail in %d of %d replays again: kept an earlier one (%s)", chain[0], want, k, chain[chosen])
}

// search runs the search within the budget.
func (s *shrinker) search(began time.Time) Result {
	ctx, cancel := context.WithDeadline(s.interrupt, began.Add(s.set.Budget))
	defer cancel()
	return Search(ctx, s.run.Orig, s.run.Seen, s.test, Options{
		Steps: s.set.Steps, Interval: s.run.Base.Nemesis.Interval, Progress: s.set.Progress,
		// Room for the final replays of the best: a fallback to one
		// before it is replayed only if the budget has room left then.
		Reserve: s.finalCost,
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
