package shrink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/nemesis"
)

// fake is an oracle for the search logic alone: a candidate reproduces
// when it keeps every entry of need (original indices), each lasting at
// least minDur, with at least minClients clients, and the run lasts until
// the failure: lag after the last needed fault's start.
type fake struct {
	t          *testing.T
	need       []int
	lag        time.Duration
	minDur     time.Duration
	minClients int
	// suspects, if set, are what the runs blame (original indices), in
	// place of need.
	suspects []int
	// calls counts the oracle's calls; after budget of them (0: no limit)
	// it says the budget is spent.
	calls, budget int
	// forbid fails the test if a candidate keeps the second of a staged
	// pair without the first.
	forbid [2]int
	// took, by original index, is how long a fault that ends by itself
	// (a lease that expires) stays in force.
	took map[int]time.Duration
	// fails, if set, says in how many of its replays (the first ones) a
	// candidate that fails does (else in every one).
	fails func(c Candidate) int
	tried []Candidate
}

const replays = 3

func (f *fake) observe(c Candidate) Observation {
	o := Observation{Struck: make([]Window, len(c.Schedule.Entries))}
	for i, e := range c.Schedule.Entries {
		d := e.Duration
		if t, ok := f.took[c.Kept[i]]; ok {
			d = min(d, t)
		}
		o.Struck[i] = Window{Struck: true, Start: e.At, Stop: e.At + d, Targets: []string{e.Target}}
	}
	ok := c.Clients >= f.minClients
	var last time.Duration
	for _, k := range f.need {
		i := slices.Index(c.Kept, k)
		if i < 0 || c.Schedule.Entries[i].Duration < f.minDur {
			ok = false
			continue
		}
		last = max(last, c.Schedule.Entries[i].At)
	}
	blamed := f.need
	if f.suspects != nil {
		blamed = f.suspects
	}
	for _, k := range blamed {
		if i := slices.Index(c.Kept, k); i >= 0 {
			o.Suspects = append(o.Suspects, i)
		}
	}
	o.Violation = last + f.lag
	o.Failed = ok && o.Violation <= c.Time
	if !o.Failed {
		o.Violation = 0
	}
	return o
}

func (f *fake) test(_ context.Context, c Candidate, need Need) (Outcome, error) {
	f.calls++
	if f.budget > 0 && f.calls > f.budget {
		return Outcome{}, ErrBudget
	}
	if f.forbid != [2]int{} && slices.Contains(c.Kept, f.forbid[1]) && !slices.Contains(c.Kept, f.forbid[0]) {
		f.t.Errorf("tried %v: entry %d without the entry that stages it (%d)", c.Kept, f.forbid[1], f.forbid[0])
	}
	f.tried = append(f.tried, c)
	o := f.observe(c)
	n := 0
	if o.Failed {
		n = replays
		if f.fails != nil {
			n = f.fails(c)
		}
	}
	var out Outcome
	for i := range replays {
		r := o
		if i >= n {
			r = Observation{Struck: o.Struck}
		}
		out.Runs = append(out.Runs, r)
		if need.Decided(out.Failed(), len(out.Runs), replays) {
			break
		}
	}
	out.Reproduced = out.Failed() >= need.Want(replays)
	return out, nil
}

// schedule has n faults of 3 s, one every 5 s from 2 s, on clients c0-c4.
func schedule(n int) Candidate {
	s := nemesis.Schedule{Seed: 1, Members: 3, Clients: []string{"c0", "c1", "c2", "c3", "c4"}, Entries: []nemesis.Entry{}}
	var kept []int
	for i := range n {
		s.Entries = append(s.Entries, nemesis.Entry{At: time.Duration(2+5*i) * time.Second, Fault: nemesis.PauseClient,
			Target: fmt.Sprintf("c%d", i%5), Duration: 3 * time.Second})
		kept = append(kept, i)
	}
	return Candidate{Schedule: s, Time: time.Duration(5*n) * time.Second, Quiet: 8 * time.Second, Clients: 5, Kept: kept}
}

func search(t *testing.T, f *fake, orig Candidate) Result {
	t.Helper()
	f.t = t
	seen := f.observe(orig)
	if !seen.Failed {
		t.Fatalf("the original does not fail under the fake: %+v", seen)
	}
	return Search(context.Background(), orig, seen, f.test, Options{Steps: AllSteps})
}

func TestSearchFindsTheOneFaultThatMatters(t *testing.T) {
	f := &fake{need: []int{5}, lag: 2 * time.Second, minDur: time.Second, minClients: 2}
	orig := schedule(10)
	r := search(t, f, orig)
	if r.Stopped != nil || r.NoLongerFails {
		t.Fatalf("stopped: %v, no longer fails: %v", r.Stopped, r.NoLongerFails)
	}
	b := r.Best
	if !slices.Equal(b.Kept, []int{5}) {
		t.Fatalf("kept %v, want [5]", b.Kept)
	}
	e := b.Schedule.Entries[0]
	if e.At != nemesis.DefaultInterval {
		t.Errorf("the fault starts at %v, want it moved to the interval, %v", e.At, nemesis.DefaultInterval)
	}
	if e.Duration >= 3*time.Second || e.Duration < time.Second {
		t.Errorf("the fault lasts %v: want it shortened, but not below what it needs (1 s)", e.Duration)
	}
	if b.Time >= orig.Time/2 || b.Time < e.At+f.lag {
		t.Errorf("the run lasts %v: want under half of %v and no less than the failure needs (%v)", b.Time, orig.Time, e.At+f.lag)
	}
	if b.Clients != 2 || b.Quiet != 2*time.Second {
		t.Errorf("clients %d, quiet %v: want 2 and 2s", b.Clients, b.Quiet)
	}
	if !f.observe(b).Failed {
		t.Errorf("the best candidate does not fail: %+v", b)
	}
	// The suspects went first, right after the cut at the failure: no
	// blind halving was needed.
	if len(r.Attempts) < 2 || r.Attempts[0].Candidate.Faults() != 6 || r.Attempts[1].Candidate.Faults() != 1 {
		t.Errorf("first attempts: %v", steps(r.Attempts))
	}
	for _, a := range r.Attempts {
		if a.Accepted != (a.Outcome.Reproduced && a.Outcome.Failed() == replays) {
			t.Errorf("attempt %d accepted %v with %d of %d failed", a.N, a.Accepted, a.Outcome.Failed(), len(a.Outcome.Runs))
		}
	}
	if got := Summary(orig, b, r.Runs[0].Struck); !strings.HasPrefix(got, "10 faults over 50 s → 1 fault (pause-client c") {
		t.Errorf("summary %q", got)
	}
	if got := Removed(orig, b, nil); len(got) != 9 || got[0] != "pause-client c0 at 2.0 s for 3.0 s" {
		t.Errorf("removed %q", got)
	}
}

// A failure that needs two faults keeps both, even when the runs blame one
// only (the other was over before the failure's window began).
func TestSearchKeepsTwoFaultsBothNeeded(t *testing.T) {
	f := &fake{need: []int{1, 6}, suspects: []int{6}, lag: time.Second, minClients: 2}
	r := search(t, f, schedule(9))
	if !slices.Equal(r.Best.Kept, []int{1, 6}) {
		t.Fatalf("kept %v, want [1 6]; attempts %v", r.Best.Kept, steps(r.Attempts))
	}
	if at := r.Best.Schedule.Entries; at[0].At >= at[1].At {
		t.Errorf("moved sooner out of order: %v then %v", at[0].At, at[1].At)
	}
}

// A pause staged until a grant and the strike behind it are dropped or kept
// together: the strike alone is another fault.
func TestSearchKeepsStagedEntriesTogether(t *testing.T) {
	orig := schedule(6)
	es := orig.Schedule.Entries
	es[3].At = es[2].At
	es[2].Fault, es[2].Target, es[2].Params = nemesis.PauseMember, "m1", map[string]string{"with": "m2", "until": "grant"}
	es[3].Fault, es[3].Target = nemesis.CrashMember, "m0"
	f := &fake{need: []int{2, 3}, suspects: []int{3}, lag: time.Second, forbid: [2]int{2, 3}}
	r := search(t, f, orig)
	if !slices.Equal(r.Best.Kept, []int{2, 3}) {
		t.Fatalf("kept %v, want [2 3]", r.Best.Kept)
	}
	if b := r.Best.Schedule; !b.StagesNext(0) {
		t.Errorf("the staged pair lost its staging: %+v", b.Entries)
	}
	if !slices.ContainsFunc(f.tried, func(c Candidate) bool { return slices.Equal(c.Kept, []int{2}) }) {
		t.Errorf("the staging pause was not tried alone: %v", steps(r.Attempts))
	}
	// A staging entry that fails on its own is kept alone.
	f = &fake{need: []int{2}, suspects: []int{3}, lag: time.Second, forbid: [2]int{2, 3}}
	if r = search(t, f, orig); !slices.Equal(r.Best.Kept, []int{2}) {
		t.Errorf("kept %v, want the staging pause alone, [2]", r.Best.Kept)
	}
}

// A broken lock fails with no fault at all: the search ends with none.
func TestSearchNeedsNoFault(t *testing.T) {
	f := &fake{lag: 3 * time.Second}
	r := search(t, f, schedule(5))
	if r.Best.Faults() != 0 {
		t.Fatalf("kept %v, want no faults", r.Best.Kept)
	}
	if !strings.Contains(Summary(schedule(5), r.Best, nil), "→ no faults over") {
		t.Errorf("summary %q", Summary(schedule(5), r.Best, nil))
	}
}

// A schedule whose runs no longer fail is told apart from one that could
// not be shrunk: the original is replayed, and no replay fails.
func TestSearchOriginalNoLongerFails(t *testing.T) {
	f := &fake{need: []int{1}, lag: time.Second}
	orig := schedule(4)
	seen := f.observe(orig)
	f.t, f.need = t, []int{99} // from now on nothing reproduces
	r := Search(context.Background(), orig, seen, f.test, Options{Steps: AllSteps})
	if !r.NoLongerFails || r.Original == nil || r.Original.Failed() != 0 {
		t.Fatalf("no longer fails: %v, original %+v", r.NoLongerFails, r.Original)
	}
	if len(r.Attempts) != 3 || r.Attempts[2].Candidate.Faults() != 4 {
		t.Errorf("attempts %v: want the cut, the suspects, then the original", steps(r.Attempts))
	}
}

// When the budget ends the search, the best found so far is kept.
func TestSearchBudgetKeepsTheBestSoFar(t *testing.T) {
	f := &fake{need: []int{5}, lag: 2 * time.Second, budget: 2}
	r := search(t, f, schedule(10))
	if r.Stopped != ErrBudget {
		t.Fatalf("stopped: %v", r.Stopped)
	}
	if !slices.Equal(r.Best.Kept, []int{5}) || len(r.Attempts) != 2 {
		t.Errorf("kept %v after %v", r.Best.Kept, steps(r.Attempts))
	}
	if len(r.Runs) != replays {
		t.Errorf("%d runs of the best, want its %d", len(r.Runs), replays)
	}
}

// The quiet period stays when the failure is judged in it, and steps left
// out are not taken.
func TestSearchSteps(t *testing.T) {
	f := &fake{need: []int{2}, lag: time.Second}
	f.t = t
	orig := schedule(4)
	r := Search(context.Background(), orig, f.observe(orig), f.test, Options{Steps: Steps{Faults: true, Time: true, KeepQuiet: true}})
	if r.Best.Quiet != orig.Quiet || r.Best.Clients != orig.Clients {
		t.Errorf("quiet %v, clients %d: want them as they were", r.Best.Quiet, r.Best.Clients)
	}
	if r.Best.Faults() != 1 {
		t.Errorf("kept %v", r.Best.Kept)
	}
}

func TestWithClients(t *testing.T) {
	c := schedule(3)
	es := c.Schedule.Entries
	es[0].Target = "c3"
	es[1].Target, es[1].Fallback = nemesis.TargetHolder, "c4"
	es[2].Fault, es[2].Target = nemesis.PartitionOne, ""
	es[2].Sides = map[string]int{"c0": 0, "c1": 1, "c2": 1, "c3": 0, "c4": 1}
	got, ok := withClients(c, 2)
	if !ok {
		t.Fatal("not mapped")
	}
	g := got.Schedule.Entries
	if got.Clients != 2 || !slices.Equal(got.Schedule.Clients, []string{"c0", "c1"}) {
		t.Errorf("clients %d %v", got.Clients, got.Schedule.Clients)
	}
	if g[0].Target != "c0" || g[1].Fallback != "c0" {
		t.Errorf("targets %q, fallback %q", g[0].Target, g[1].Fallback)
	}
	// c0 now stands for c3 (side 0), c1 for itself (side 1).
	if len(g[2].Sides) != 2 || g[2].Sides["c0"] != 0 || g[2].Sides["c1"] != 1 {
		t.Errorf("sides %v", g[2].Sides)
	}
	if es[0].Target != "c3" || len(es[2].Sides) != 5 {
		t.Error("the original candidate was changed")
	}
	three := schedule(3)
	if _, ok := withClients(three, 2); ok {
		t.Error("three clients named outright were squeezed into two")
	}
}

func steps(as []Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s: %d faults over %v -> %v", a.Candidate.Step, a.Candidate.Faults(), a.Candidate.Time, a.Accepted))
	}
	return out
}

// A fault that ended by itself is shortened to a little more than it
// took, not halved; one cut short by the run's end is not taken for one.
func TestSearchShortensToWhatAFaultTook(t *testing.T) {
	orig := schedule(2)
	orig.Schedule.Entries[1].Duration = 6 * time.Second
	f := &fake{need: []int{1}, lag: time.Second, minDur: 2500 * time.Millisecond, took: map[int]time.Duration{1: 2100 * time.Millisecond}}
	r := search(t, f, orig)
	if d := r.Best.Schedule.Entries[0].Duration; d != 3200*time.Millisecond {
		t.Errorf("lasts %v, want 3.2s: the 2.1 s it took and half again (at least a second)", d)
	}
	s := &searcher{best: orig, runs: []Observation{{Struck: []Window{{Struck: true, Stop: time.Second, Cut: true}, {Struck: true, Stop: time.Second}}}}}
	if got := s.inForce(0); got != orig.Schedule.Entries[0].Duration {
		t.Errorf("a fault cut short by the run's end counts %v in force, want its whole duration", got)
	}
	if got := s.inForce(1); got != time.Second {
		t.Errorf("in force %v, want the 1 s it took", got)
	}
}

// A candidate's line tells apart two that differ only in their quiet
// period (the final replays' fallback names both).
func TestCandidateString(t *testing.T) {
	c := Candidate{Schedule: nemesis.Schedule{Entries: []nemesis.Entry{{Fault: nemesis.PauseClient}, {Fault: nemesis.Isolate}}},
		Time: 12 * time.Second, Quiet: 8 * time.Second, Clients: 5}
	q := c
	q.Quiet = 2 * time.Second
	if got, want := c.String(), "2 faults (pause-client, isolate) over 12 s, quiet 8 s, 5 clients"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if c.String() == q.String() {
		t.Errorf("a shorter quiet period is not told: %q", q.String())
	}
}

// A failure that comes in only some runs of the original schedule is
// shrunk all the same: the original is replayed and its rate measured, and
// a candidate counts if it fails as often (the candidates judged before
// by every replay are judged again); one that fails less often does not.
func TestSearchFlakyOriginal(t *testing.T) {
	twoOfThree := func(Candidate) int { return 2 }
	f := &fake{need: []int{5}, lag: 2 * time.Second, minDur: time.Second, minClients: 2, fails: twoOfThree}
	r := search(t, f, schedule(10))
	if r.Original == nil || r.Original.Failed() != 2 || len(r.Original.Runs) != replays {
		t.Fatalf("the original's rate was not measured over %d replays: %+v", replays, r.Original)
	}
	if r.Need.Want(replays) != 2 {
		t.Errorf("need %+v, want 2 of %d: as often as the original", r.Need, replays)
	}
	if !slices.Equal(r.Best.Kept, []int{5}) {
		t.Fatalf("kept %v, want [5]; attempts %v", r.Best.Kept, steps(r.Attempts))
	}
	accepted := 0
	for _, a := range r.Attempts {
		if a.Accepted {
			accepted++
			if a.Outcome.Failed() < 2 {
				t.Errorf("attempt %d accepted with %d of %d failed", a.N, a.Outcome.Failed(), len(a.Outcome.Runs))
			}
		}
	}
	if accepted == 0 {
		t.Errorf("nothing accepted: %v", steps(r.Attempts))
	}

	// Fewer faults fail 1 of 3 only: less often than the original, 2 of 3.
	f = &fake{need: []int{5}, lag: 2 * time.Second, minDur: time.Second, minClients: 2, fails: func(c Candidate) int {
		if c.Faults() < 10 {
			return 1
		}
		return 2
	}}
	r = search(t, f, schedule(10))
	if r.Best.Faults() != 10 || slices.ContainsFunc(r.Attempts, func(a Attempt) bool { return a.Accepted && a.Candidate.Faults() < 10 }) {
		t.Errorf("a candidate failing 1 of 3 was kept against an original failing 2 of 3: %v", steps(r.Attempts))
	}
}

func TestNeed(t *testing.T) {
	const k = 3
	for _, c := range []struct {
		need             Need
		failed, replayed int
		want             int
		decided          bool
	}{
		{Every, 1, 1, 3, false},
		{Every, 0, 1, 3, true}, // the first miss settles it
		{Every, 3, 3, 3, true},
		{Need{Fails: 2}, 1, 2, 2, false},
		{Need{Fails: 2}, 0, 2, 2, true}, // two misses: 2 of 3 cannot be met
		{Need{Fails: 2}, 2, 2, 2, true},
		{Need{Fails: 9}, 2, 2, 3, false}, // more than k asks every one
		{measure, 1, 1, 1, false},        // a rate runs every replay
		{measure, 2, 3, 1, false},
	} {
		if got := c.need.Want(k); got != c.want {
			t.Errorf("%+v.Want(%d) = %d, want %d", c.need, k, got, c.want)
		}
		if got := c.need.Decided(c.failed, c.replayed, k); got != c.decided {
			t.Errorf("%+v.Decided(%d, %d, %d) = %v, want %v", c.need, c.failed, c.replayed, k, got, c.decided)
		}
	}
}
