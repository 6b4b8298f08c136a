// Package shrink searches for a smaller fault schedule that still makes a
// failing run fail the same way: fewer faults first (delta debugging over
// the schedule's entries: halves, then one by one), then faults that start
// sooner, last less and a run that ends earlier, then fewer clients. Runs
// are not perfectly deterministic (the workload's randomness comes from the
// seed, its timing does not), so whether a candidate reproduces the failure
// is decided by an Oracle the caller injects: in locktest, real replays, a
// candidate counting only if every one of them failed, or, once the
// original schedule itself failed in only some of its replays, if it
// failed at least as often. The search itself is pure: it decides what to
// try from what the oracle observed.
package shrink

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/locktest/locktest/nemesis"
)

// Candidate is one schedule to try, with the run settings it goes with.
type Candidate struct {
	Schedule nemesis.Schedule
	// Time is how long the faults may run (--time), Quiet the time after
	// the final heal (--quiet), Clients the number of clients.
	Time    time.Duration
	Quiet   time.Duration
	Clients int
	// Kept are, for each entry of Schedule, its index in the original
	// schedule.
	Kept []int
	// Step says what the candidate tried, for the progress lines.
	Step string
}

// Faults is the number of faults the candidate keeps.
func (c Candidate) Faults() int { return len(c.Schedule.Entries) }

// key identifies what a candidate runs, for not trying one twice.
func (c Candidate) key() string {
	b, _ := json.Marshal(struct {
		E       []nemesis.Entry
		T, Q    time.Duration
		Clients int
	}{c.Schedule.Entries, c.Time, c.Quiet, c.Clients})
	return string(b)
}

// Window is when one schedule entry's fault was in force in a run, since
// its fault phase began.
type Window struct {
	Struck      bool
	Start, Stop time.Duration
	// Cut says the run's fault phase ended while it was in force.
	Cut bool
	// Targets are the members or clients it struck, as resolved.
	Targets []string
}

// Observation is what one run showed of the failure being shrunk.
type Observation struct {
	// Failed says the target failure happened.
	Failed bool
	// Violation is when the earliest violation of the target was complete,
	// since the fault phase began; 0 when the check gave no time.
	Violation time.Duration
	// Struck holds a window per schedule entry.
	Struck []Window
	// Suspects are the entries whose faults were in force during that
	// violation.
	Suspects []int
	// Dir is the run's directory.
	Dir string
	// Note says why a replay could not be judged, if it could not.
	Note string
}

// Need is what a test asks of a candidate's replays: that at least Fails
// of them fail (0: every one). The oracle stops once the answer is known
// (the first replay that does not fail, for every one), unless All asks
// for every replay whatever the first show: a rate is measured.
type Need struct {
	Fails int
	All   bool
}

// Every asks that every replay fail.
var Every = Need{}

// measure is what the original schedule's replays are asked: each runs,
// and one failure shows that it still fails.
var measure = Need{Fails: 1, All: true}

// Want is how many of k replays must fail.
func (n Need) Want(k int) int {
	if n.Fails <= 0 || n.Fails > k {
		return k
	}
	return n.Fails
}

// Decided says whether replays so far, failed of them failing, settle
// the need of k: it is met, or can no longer be.
func (n Need) Decided(failed, replayed, k int) bool {
	want := n.Want(k)
	return !n.All && (failed >= want || k-(replayed-failed) < want)
}

// Outcome is what the oracle's replays of one candidate showed.
type Outcome struct {
	Reproduced bool
	Runs       []Observation
}

// Failed counts the replays that failed as wanted.
func (o Outcome) Failed() int {
	n := 0
	for _, r := range o.Runs {
		if r.Failed {
			n++
		}
	}
	return n
}

// failing are the replays that failed as wanted.
func (o Outcome) failing() []Observation {
	var out []Observation
	for _, r := range o.Runs {
		if r.Failed {
			out = append(out, r)
		}
	}
	return out
}

// Oracle replays a candidate and says whether it reproduced the failure.
// Its error stops the search: ErrBudget when no replay fits in what is left
// of the budget (ctx's deadline), the context's error when interrupted, or
// a failure to replay at all.
type Oracle func(ctx context.Context, c Candidate, need Need) (Outcome, error)

// ErrBudget is the oracle's error when the budget has no room for another
// replay.
var ErrBudget = errors.New("the budget is spent")

// Steps choose what the search may shrink.
type Steps struct {
	Faults    bool // drop faults
	Time      bool // start them sooner, shorten them, end the run earlier
	Clients   bool // fewer clients
	KeepQuiet bool // never shorten the quiet period (the failure is judged in it: liveness)
}

// AllSteps shrinks everything.
var AllSteps = Steps{Faults: true, Time: true, Clients: true}

// Options tune the search.
type Options struct {
	Steps Steps
	// Interval is the quiet time before a fault that a schedule keeps when
	// its faults are moved sooner (the nemesis interval).
	Interval time.Duration
	// MinQuiet is the quiet period tried when it may be shortened.
	MinQuiet time.Duration
	// MinClients is the fewest clients tried (2: two to contend).
	MinClients int
	// Reserve is the time kept back from the budget for the final replays
	// of the best candidate, given its failing runs.
	Reserve func(best Candidate, runs []Observation) time.Duration
	// Progress, if set, hears of each attempt as it starts (done false) and
	// once it is judged.
	Progress func(a Attempt, done bool)
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = nemesis.DefaultInterval
	}
	if o.MinQuiet <= 0 {
		o.MinQuiet = 2 * time.Second
	}
	if o.MinClients < 2 {
		o.MinClients = 2
	}
}

// Attempt is one candidate tried.
type Attempt struct {
	N         int
	Candidate Candidate
	Outcome   Outcome
	Accepted  bool
}

// Result is what the search found.
type Result struct {
	// Best is the smallest candidate that reproduced (the original, when
	// none did), Runs its replays that failed (the original run's
	// observation, when it is the original).
	Best Candidate
	Runs []Observation
	// Attempts are the candidates tried, in order.
	Attempts []Attempt
	// Stopped is why the search ended early: ErrBudget, the context's
	// error, or the oracle's; nil when it ran to its end.
	Stopped error
	// Original holds the replays of the original schedule, when the search
	// had to replay it (its first smaller candidates did not reproduce).
	Original *Outcome
	// Need is what a candidate's replays had to show to count: every one
	// failing, or, when the original's replays did not all fail, as many
	// as of those.
	Need Need
	// NoLongerFails says that no replay of the original schedule failed:
	// there is nothing to shrink.
	NoLongerFails bool
}

// Search shrinks orig, whose run showed seen (a failure of the target),
// asking test whether each candidate reproduces it. It stops when it has
// nothing left to try, when the oracle says the budget is spent, or when
// ctx ends; Result.Best is then the smallest candidate found so far.
func Search(ctx context.Context, orig Candidate, seen Observation, test Oracle, opt Options) Result {
	opt.defaults()
	if orig.Kept == nil {
		orig.Kept = make([]int, len(orig.Schedule.Entries))
		for i := range orig.Kept {
			orig.Kept[i] = i
		}
	}
	s := &searcher{ctx: ctx, test: test, opt: opt, best: orig, runs: []Observation{seen}, tried: map[string]bool{orig.key(): true}, need: Every}
	s.search()
	return Result{Best: s.best, Runs: s.runs, Attempts: s.attempts, Stopped: s.stopped, Original: s.original, NoLongerFails: s.noLongerFails, Need: s.need}
}

type searcher struct {
	ctx      context.Context
	test     Oracle
	opt      Options
	best     Candidate
	runs     []Observation // the best's runs that failed
	tried    map[string]bool
	attempts []Attempt
	stopped  error
	// need is what a candidate's replays must show to count.
	need Need
	// verified says a replay reproduced the failure: a smaller candidate, or
	// the original itself.
	verified      bool
	original      *Outcome
	noLongerFails bool
}

func (s *searcher) search() {
	if s.opt.Steps.Faults {
		if c, ok := s.cutAtViolation(); ok {
			s.try(c)
		}
		if !s.verified {
			s.suspects()
		}
	}
	// A smaller candidate that reproduced shows that the schedule still
	// fails; failing that, the original is replayed to tell a schedule
	// that no longer fails from one that could not be shrunk.
	if !s.verified && !s.verifyOriginal() {
		return
	}
	if s.opt.Steps.Faults {
		// The replays may place the failure elsewhere than the original
		// run did.
		if c, ok := s.cutAtViolation(); ok {
			s.try(c)
		}
		s.suspects()
		if s.opt.Steps.Time {
			// Sooner faults make every later candidate quicker to replay.
			s.trySooner()
		}
		s.ddmin()
		if s.oneUnit() {
			// Delta debugging keeps one unit at least; a broken lock may
			// need none.
			s.try(s.subset(nil, "no faults"))
		}
	}
	if s.opt.Steps.Time {
		s.trySooner()
		if s.shorter() {
			s.trySooner()
		}
		s.earlierEnd()
	}
	if s.opt.Steps.Clients {
		s.fewerClients()
	}
}

// try tests c unless it was tried already or the search has stopped, and
// makes it the best if its replays reproduced the failure as s.need asks.
func (s *searcher) try(c Candidate) bool {
	if s.stopped != nil {
		return false
	}
	if s.tried[c.key()] {
		return false
	}
	s.tried[c.key()] = true
	out, ok := s.run(c, s.need)
	if ok && out.Reproduced {
		s.best, s.runs, s.verified = c, out.failing(), true
		return true
	}
	return false
}

// run asks the oracle, with the budget's end moved up by the time reserved
// for the final replays, and records the attempt.
func (s *searcher) run(c Candidate, need Need) (Outcome, bool) {
	ctx := s.ctx
	if dl, ok := ctx.Deadline(); ok && s.opt.Reserve != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-s.opt.Reserve(s.best, s.runs)))
		defer cancel()
	}
	a := Attempt{N: len(s.attempts) + 1, Candidate: c}
	if s.opt.Progress != nil {
		s.opt.Progress(a, false)
	}
	out, err := s.test(ctx, c, need)
	if err == nil && s.ctx.Err() != nil {
		err = s.ctx.Err()
	}
	a.Outcome = out
	a.Accepted = err == nil && out.Reproduced && !need.All
	if err != nil {
		s.stopped = err
		// An attempt cut short is not reported as judged: it was not.
		return out, false
	}
	s.attempts = append(s.attempts, a)
	if s.opt.Progress != nil {
		s.opt.Progress(a, true)
	}
	return out, true
}

// verifyOriginal replays the original schedule as often as a candidate,
// so that a schedule that no longer fails at all is told apart from one
// the search could not shrink, and measures how often it fails: when not
// every replay did, a candidate counts from now on if it fails as often
// (a failure that comes half the time comes half the time with fewer
// faults too), and the candidates judged before are judged again.
func (s *searcher) verifyOriginal() bool {
	if s.stopped != nil {
		return false
	}
	c := s.best
	c.Step = "the original schedule"
	out, ok := s.run(c, measure)
	if !ok {
		return false
	}
	s.original = &out
	failed := out.Failed()
	if failed == 0 {
		s.noLongerFails = true
		return false
	}
	if failed < len(out.Runs) {
		s.need = Need{Fails: failed}
		s.tried = map[string]bool{s.best.key(): true}
	}
	s.runs, s.verified = out.failing(), true
	return true
}

// fewer is the best with only the entries whose original indices are in
// keep, started sooner when time may be shrunk too: a fault aimed at a
// moment waits for one wherever it starts, and a candidate that ends
// sooner is quicker to replay.
func (s *searcher) fewer(keep []int, step string) Candidate {
	c := s.subset(keep, step)
	if s.opt.Steps.Time {
		if sc, ok := s.sooner(c); ok {
			sc.Step += ", sooner"
			return sc
		}
	}
	return c
}

// subset is the best candidate with only the entries whose original
// indices are in keep.
func (s *searcher) subset(keep []int, step string) Candidate {
	c := s.best
	c.Step = step
	c.Schedule.Entries, c.Kept = []nemesis.Entry{}, []int{}
	for i, e := range s.best.Schedule.Entries {
		if slices.Contains(keep, s.best.Kept[i]) {
			c.Schedule.Entries = append(c.Schedule.Entries, cloneEntry(e))
			c.Kept = append(c.Kept, s.best.Kept[i])
		}
	}
	return c
}

// cutAtViolation drops the faults that struck after the failure was
// already complete, or never struck, and ends the run soon after it: they
// cannot have caused it.
func (s *searcher) cutAtViolation() (Candidate, bool) {
	var keep []int
	for i := range s.best.Schedule.Entries {
		for _, r := range s.runs {
			if w := window(r, i); r.Violation > 0 && w.Struck && w.Start <= r.Violation && !slices.Contains(keep, s.best.Kept[i]) {
				keep = append(keep, s.best.Kept[i])
			}
		}
	}
	c := s.subset(keep, "drop the faults after the failure, end soon after it")
	if !s.endSoon(&c) {
		return c, false
	}
	return c, c.key() != s.best.key()
}

// endSoon ends c's fault phase a margin after the failure came in the
// best's failing runs, but no sooner than the faults it keeps that struck
// then could run their course; false when the runs gave no time.
func (s *searcher) endSoon(c *Candidate) bool {
	var at []time.Duration
	for _, r := range s.runs {
		if r.Violation > 0 {
			at = append(at, r.Violation)
		}
	}
	if len(at) == 0 {
		return false
	}
	end := roundUp(slices.Max(at) + endMargin(at))
	for i, e := range c.Schedule.Entries {
		for _, r := range s.runs {
			if w := window(r, slices.Index(s.best.Kept, c.Kept[i])); w.Struck {
				end = max(end, roundUp(w.Start+e.Duration))
			}
		}
	}
	c.Time = min(c.Time, end)
	return true
}

// suspects tries the faults that were in force during the violation alone
// (or no fault, when none was): the likeliest cause, tried before the
// blind halving.
func (s *searcher) suspects() {
	var keep []int
	timed := false
	for _, r := range s.runs {
		timed = timed || r.Violation > 0
		for _, i := range r.Suspects {
			if i < len(s.best.Kept) && !slices.Contains(keep, s.best.Kept[i]) {
				keep = append(keep, s.best.Kept[i])
			}
		}
	}
	switch keep = s.withStaging(keep); {
	case !timed:
		// The check said nothing of when, or during which faults.
	case len(keep) == 0:
		s.try(s.subset(nil, "no faults (none was in force during the failure)"))
	case len(keep) < len(s.best.Schedule.Entries):
		c := s.fewer(keep, "the faults in force during the failure")
		if c.Time == s.best.Time && s.endSoon(&c) && c.Time < s.best.Time {
			c.Step += ", end soon after it"
		}
		s.try(c)
	}
}

// withStaging adds to keep (original indices) the entry that stages each
// entry it holds (nemesis.Schedule.StagesNext): a strike is never tried
// without it, though it may be tried alone.
func (s *searcher) withStaging(keep []int) []int {
	out := slices.Clone(keep)
	for j := len(s.best.Kept) - 1; j > 0; j-- {
		if slices.Contains(out, s.best.Kept[j]) && s.best.Schedule.StagesNext(j-1) && !slices.Contains(out, s.best.Kept[j-1]) {
			out = append(out, s.best.Kept[j-1])
		}
	}
	slices.Sort(out)
	return out
}

// ddmin is delta debugging over the best's entries: try each of n parts
// alone (halves first), then the whole without each part, doubling n up
// to one entry per part (one by one). A part that would be no smaller once
// its staging entries are added is not tried.
func (s *searcher) ddmin() {
	items := slices.Clone(s.best.Kept)
	n := 2
	for len(items) >= 2 && s.stopped == nil {
		parts := split(items, n)
		reduced := false
		test := func(keep []int, step string) bool {
			keep = s.withStaging(keep)
			if len(keep) >= len(items) || !s.try(s.fewer(keep, step)) {
				return false
			}
			items, reduced = keep, true
			return true
		}
		for i, p := range parts {
			if test(p, partName(i, len(parts), false)) {
				n = 2
				break
			}
		}
		if !reduced && len(parts) > 2 {
			for i := range parts {
				if test(slices.Concat(slices.Delete(slices.Clone(parts), i, i+1)...), partName(i, len(parts), true)) {
					n = max(n-1, 2)
					break
				}
			}
		}
		if !reduced {
			if n >= len(items) {
				return
			}
			n = min(2*n, len(items))
		}
	}
}

func split(items []int, n int) [][]int {
	var out [][]int
	for i := range n {
		lo, hi := i*len(items)/n, (i+1)*len(items)/n
		if hi > lo {
			out = append(out, items[lo:hi])
		}
	}
	return out
}

func partName(i, n int, without bool) string {
	var what string
	switch {
	case n == 2 && i == 0:
		what = "the first half"
	case n == 2:
		what = "the second half"
	default:
		what = "part " + itoa(i+1) + " of " + itoa(n)
	}
	if without {
		return "all but " + what
	}
	return what + " of the faults"
}
