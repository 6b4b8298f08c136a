package shrink

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/nemesis"
)

// oneUnit says whether the best's faults are one entry, or one entry and
// the one that stages it: delta debugging keeps one such unit at least.
func (s *searcher) oneUnit() bool {
	es := s.best.Schedule.Entries
	return len(es) == 1 || len(es) == 2 && s.best.Schedule.StagesNext(0)
}

// sooner moves c's faults (some of the best's) to start as soon as the
// one before them has had its time (the first at the nemesis interval),
// and ends the run as long after the fault that came last before the
// failure as the failure came after it in the best's runs, with a margin.
// False when it changes nothing, or the runs gave no time of the failure.
func (s *searcher) sooner(c Candidate) (Candidate, bool) {
	es := c.Schedule.Entries
	if len(es) == 0 {
		return c, false
	}
	out := c
	out.Schedule.Entries = make([]nemesis.Entry, len(es))
	for j, e := range es {
		e = cloneEntry(e)
		at := min(e.At, s.opt.Interval)
		switch {
		case j > 0 && c.Schedule.StagesNext(j-1):
			at = out.Schedule.Entries[j-1].At
		case j > 0:
			at = out.Schedule.Entries[j-1].At + s.inForce(slices.Index(s.best.Kept, c.Kept[j-1])) + s.opt.Interval
		}
		e.At = min(at, e.At)
		out.Schedule.Entries[j] = e
	}
	// When the failure came in each run, moved as the fault before it.
	var ends []time.Duration
	for _, r := range s.runs {
		j := -1
		for k, e := range es {
			if r.Violation > 0 && e.At <= r.Violation {
				j = k
			}
		}
		if j >= 0 {
			ends = append(ends, r.Violation-(es[j].At-out.Schedule.Entries[j].At))
		}
	}
	if len(ends) == 0 {
		return c, false
	}
	last := out.Schedule.Entries[len(es)-1].At
	out.Time = min(c.Time, max(roundUp(slices.Max(ends)+endMargin(ends)), roundUp(last+time.Second)))
	return out, out.key() != c.key()
}

// trySooner tries the best with its faults sooner.
func (s *searcher) trySooner() {
	if c, ok := s.sooner(s.clone("start the faults sooner, end sooner")); ok {
		s.try(c)
	}
}

// inForce is the longest entry i of the best was in force in its failing
// runs: its duration if it never struck, or if a run's end cut it short.
func (s *searcher) inForce(i int) time.Duration {
	var longest time.Duration
	struck := false
	for _, r := range s.runs {
		w := window(r, i)
		if w.Cut {
			return s.best.Schedule.Entries[i].Duration
		}
		if w.Struck {
			longest, struck = max(longest, w.Stop-w.Start), true
		}
	}
	if !struck {
		return s.best.Schedule.Entries[i].Duration
	}
	return longest
}

// shorter tries each fault, the longest first, for less time: a fault that
// ended by itself (a lease that expired, a grant that came) for a little
// more than it took, another for half its duration.
func (s *searcher) shorter() bool {
	order := slices.Clone(s.best.Kept)
	dur := map[int]time.Duration{}
	for i, k := range s.best.Kept {
		dur[k] = s.best.Schedule.Entries[i].Duration
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(dur[b] - dur[a]) })
	shortened := false
	for _, k := range order {
		i := slices.Index(s.best.Kept, k)
		e := s.best.Schedule.Entries[i]
		d := e.Duration / 2
		if took := s.inForce(i); took+500*time.Millisecond < e.Duration {
			d = took + max(time.Second, took/2)
		}
		d = d.Round(100 * time.Millisecond)
		if d < 100*time.Millisecond || d >= e.Duration {
			continue
		}
		c := s.clone("shorten " + e.Fault + " to " + d.String())
		c.Schedule.Entries[i].Duration = d
		shortened = s.try(c) || shortened
	}
	return shortened
}

// earlierEnd ends the run soon after the failure came in the best's runs,
// and shortens the quiet period after the heal unless the failure is
// judged there.
func (s *searcher) earlierEnd() {
	var at []time.Duration
	for _, r := range s.runs {
		if r.Violation > 0 {
			at = append(at, r.Violation)
		}
	}
	end := s.best.Time
	if len(at) > 0 {
		end = min(end, roundUp(slices.Max(at)+endMargin(at)))
	}
	quiet := s.best.Quiet
	if !s.opt.Steps.KeepQuiet {
		quiet = min(quiet, s.opt.MinQuiet)
	}
	var step []string
	if end < s.best.Time {
		step = append(step, "end the run earlier")
	}
	if quiet < s.best.Quiet {
		step = append(step, "shorten the quiet period after the heal")
	}
	if len(step) == 0 {
		return
	}
	c := s.clone(strings.Join(step, ", "))
	c.Time, c.Quiet = end, quiet
	if s.try(c) || len(step) == 1 {
		return
	}
	c.Step, c.Quiet = step[0], s.best.Quiet
	s.try(c)
}

// fewerClients tries the fewest clients, then half way to the best's.
func (s *searcher) fewerClients() {
	low := s.opt.MinClients
	for _, n := range []int{low, (low + s.best.Clients) / 2} {
		if n >= s.best.Clients {
			continue
		}
		if c, ok := withClients(s.best, n); ok && s.try(c) {
			return
		}
	}
}

// withClients is c with n clients: the first n of its schedule's, each
// client a fault names outright kept (renamed to a free one when it is
// beyond n), other mentions mapped onto the n. False when the faults name
// more than n clients.
func withClients(c Candidate, n int) (Candidate, bool) {
	names := c.Schedule.Clients
	if n >= len(names) || n < 1 {
		return c, false
	}
	idx := func(x string) int { return slices.Index(names, x) }
	var named []string
	for _, e := range c.Schedule.Entries {
		if idx(e.Target) >= 0 && !slices.Contains(named, e.Target) {
			named = append(named, e.Target)
		}
	}
	if len(named) > n {
		return c, false
	}
	to := map[string]string{}
	for _, x := range named {
		if idx(x) < n {
			to[x] = x
		}
	}
	for _, x := range named {
		if _, ok := to[x]; ok {
			continue
		}
		for _, free := range names[:n] {
			if !slices.Contains(slices.Collect(maps.Values(to)), free) {
				to[x] = free
				break
			}
		}
	}
	from := map[string]string{} // new name -> the old client it stands for
	for _, x := range names[:n] {
		from[x] = x
	}
	for x, y := range to {
		from[y] = x
	}
	rename := func(x string) string {
		if i := idx(x); i >= 0 {
			if y, ok := to[x]; ok {
				return y
			}
			return names[i%n]
		}
		return x
	}
	out := c
	out.Step = "with " + strconv.Itoa(n) + " clients"
	out.Clients = n
	out.Schedule.Clients = slices.Clone(names[:n])
	out.Schedule.Entries = make([]nemesis.Entry, len(c.Schedule.Entries))
	for i, e := range c.Schedule.Entries {
		e = cloneEntry(e)
		e.Target, e.Fallback = rename(e.Target), rename(e.Fallback)
		if e.Sides != nil {
			sides := map[string]int{}
			for _, x := range names[:n] {
				if side, ok := e.Sides[from[x]]; ok {
					sides[x] = side
				}
			}
			e.Sides = sides
		}
		out.Schedule.Entries[i] = e
	}
	return out, true
}

// clone is a copy of the best candidate, for a step to change.
func (s *searcher) clone(step string) Candidate {
	c := s.best
	c.Step = step
	c.Kept = slices.Clone(s.best.Kept)
	c.Schedule.Entries = make([]nemesis.Entry, len(s.best.Schedule.Entries))
	for i, e := range s.best.Schedule.Entries {
		c.Schedule.Entries[i] = cloneEntry(e)
	}
	return c
}

func cloneEntry(e nemesis.Entry) nemesis.Entry {
	e.Params = maps.Clone(e.Params)
	e.Sides = maps.Clone(e.Sides)
	e.Groups = slices.Clone(e.Groups)
	return e
}

// window is entry i's window in r.
func window(r Observation, i int) Window {
	if i < 0 || i >= len(r.Struck) {
		return Window{}
	}
	return r.Struck[i]
}

// endMargin is how much later than the failure came a run goes on: two
// seconds, a tenth of the time it took, and the spread of when it came
// (timing varies from run to run).
func endMargin(at []time.Duration) time.Duration {
	if len(at) == 0 {
		return 2 * time.Second
	}
	return 2*time.Second + slices.Max(at)/10 + slices.Max(at) - slices.Min(at)
}

// roundUp rounds d up to half a second.
func roundUp(d time.Duration) time.Duration {
	const step = 500 * time.Millisecond
	return (d + step - 1) / step * step
}

func itoa(n int) string { return strconv.Itoa(n) }
