// The liveness check: after the final heal, every client asking gets the
// lock.

package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

// Liveness checks a history; see History.Liveness.
func Liveness(ops []histories.Op, bound time.Duration) Result { return Build(ops).Liveness(bound) }

// Liveness checks that, once every fault has ended, every client that asked
// for a lock got it within bound. That is from the final heal (the last
// nemesis "heal" event), or the end of the last fault window if later;
// without faults, the whole run counts (from its first record). A fault
// that never ended leaves liveness unjudged: no time is fault-free.
//
// Clients are judged, not process numbers: a client goes on under a new
// process number after an unknown outcome, and the "process" events say
// which (a process no event names is a client of its own). An acquire is
// judged from when it was asked for after the heal: its invocation, or the
// heal if it was waiting then. It is stuck if it had not returned ok by
// bound after that, and had not given up (fail or info) before. A client
// that asked, or failed to build its locker ("locker-failed" events), over
// more than bound after the heal and never got a grant is stuck too, however
// its attempts ended. Acquires still waiting less than bound before the end
// of the history are not judged.
//
// A history with no acquire and no locker failure is unknown: there is
// nothing to judge; one in which the lock granted nothing at all says so,
// and is invalid if a client was stuck, else unknown.
func (h *History) Liveness(bound time.Duration) Result {
	began := time.Now()
	res := Result{Name: histories.CheckLiveness, Verdict: Unknown}
	if h.err != nil {
		res.Explanation = "The history is malformed: " + h.err.Error() + "."
		return res
	}
	sd := h.story()
	// name is the client behind p: one the process events name, else p
	// itself, as "process 2".
	name := func(p histories.Process) string {
		if c := sd.clients[p]; c != "" {
			return c
		}
		return fmt.Sprintf("process %d", p)
	}
	// who names the actor of a story, e.g. "Client c3 (process 7)".
	who := func(c string, p histories.Process) string {
		if c == fmt.Sprintf("process %d", p) {
			return fmt.Sprintf("Process %d", p)
		}
		return fmt.Sprintf("Client %s (process %d)", c, p)
	}
	asked, granted := map[string]bool{}, 0
	for _, o := range h.ops {
		if o.f == histories.Acquire {
			asked[name(o.process)] = true
			if o.status == histories.OK {
				granted++
			}
		}
	}
	for _, f := range sd.lockerFailed {
		asked[f.client] = true
	}
	if len(asked) == 0 {
		res.Explanation = "The history has no acquire: there is nothing to judge."
		res.Duration = time.Since(began)
		return res
	}
	from, since := h.start, "the start of the history"
	if sd.heal >= 0 {
		from, since = sd.heal, "the final heal at "+h.at(sd.heal)
	}
	for _, f := range sd.faults {
		if f.Unended {
			res.Explanation = fmt.Sprintf("Fault %s started at %s and never ended (no stop, no heal after it): no time of the history is free of faults to judge liveness in.", f.Fault, h.at(f.Start))
			res.Duration = time.Since(began)
			return res
		}
		if f.End > from {
			from, since = f.End, "the end of the last fault at "+h.at(f.End)
		}
	}
	keys := map[string]bool{}
	type attempts struct {
		key         string
		first, last int64
		n, failed   int
		got         bool
		procs       []histories.Process
		lockerErr   string
	}
	perClient := map[string]*attempts{}
	attempt := func(c string, t int64) *attempts {
		a := perClient[c]
		if a == nil {
			a = &attempts{first: t, last: t}
			perClient[c] = a
		}
		a.first, a.last = min(a.first, t), max(a.last, t)
		return a
	}
	var stuck []Violation
	for _, o := range h.ops {
		if o.f != histories.Acquire || o.ret < from && !o.missing {
			continue
		}
		asked := max(o.call, from)
		deadline := addSat(asked, int64(bound))
		if deadline >= h.end && o.missing {
			// Still waiting at the end, but not yet for bound: not judged
			// alone, but the client was asking until the end.
			a := attempt(name(o.process), asked)
			a.last, a.key = h.end, cmp.Or(a.key, o.key)
			a.n++
			continue
		}
		res.Ops++
		keys[o.key] = true
		if o.unknown() {
			res.Unknown++
		}
		c := name(o.process)
		a := attempt(c, asked)
		a.last = max(a.last, o.ret)
		a.key = cmp.Or(a.key, o.key)
		a.n++
		if o.status == histories.OK {
			a.got = true
		}
		if len(a.procs) == 0 || a.procs[len(a.procs)-1] != o.process { // a client's processes come one after another
			a.procs = append(a.procs, o.process)
		}
		switch {
		case o.status == histories.OK && o.ret <= deadline:
		case o.status != histories.OK && !o.missing && o.ret <= deadline:
			// Gave up in time; judged with the client's other attempts.
		default:
			v := Violation{Check: histories.CheckLiveness, Kind: "stuck", Key: o.key, Processes: []int{int(o.process)},
				From: asked, To: deadline, Faults: h.faultsDuring(asked, deadline)}
			s := fmt.Sprintf("%s asked for lock %q at %s and had not got it %v later, at %s (bound %v after %s)",
				who(c, o.process), o.key, h.at(asked), bound, h.at(deadline), bound, since)
			switch {
			case o.missing:
				s += fmt.Sprintf("; it was still waiting when the history ended at %s", h.at(h.end-1))
			case o.status == histories.OK:
				s += fmt.Sprintf("; it got it only at %s", h.at(o.ret))
			default:
				s += fmt.Sprintf("; it gave up (%s) at %s", o.status, h.at(o.ret))
			}
			if len(v.Faults) > 0 {
				s += "; faults active then: " + h.describeFaults(v.Faults)
			}
			v.Story = s + "."
			stuck = append(stuck, v)
			a.got = true // already named
		}
	}
	for _, f := range sd.lockerFailed {
		if f.time >= from {
			a := attempt(f.client, f.time)
			a.failed++
			a.lockerErr = cmp.Or(a.lockerErr, f.err)
		}
	}
	clients := slices.Sorted(maps.Keys(perClient))
	for _, c := range clients {
		a := perClient[c]
		if a.got || a.last-a.first <= int64(bound) {
			continue
		}
		if a.n > 0 || a.failed > 0 {
			res.Ops++ // a client judged on its attempts as a whole
		}
		v := Violation{Check: histories.CheckLiveness, Kind: "stuck", Key: a.key, From: a.first, To: a.last,
			Faults: h.faultsDuring(a.first, a.last)}
		for _, p := range a.procs {
			v.Processes = append(v.Processes, int(p))
		}
		what := fmt.Sprintf("asked for lock %q %s", a.key, words.Times(a.n))
		if a.failed > 0 {
			what = fmt.Sprintf("could not build its locker %s (%s)", words.Times(a.failed), a.lockerErr)
			if a.n > 0 {
				what = fmt.Sprintf("asked for lock %q %s and could not build its locker %s (%s)", a.key, words.Times(a.n), words.Times(a.failed), a.lockerErr)
			}
		}
		actor := "Client " + c
		if strings.HasPrefix(c, "process ") {
			actor = "P" + c[1:]
		}
		v.Story = fmt.Sprintf("%s %s from %s to %s, more than the bound of %v after %s, and never got the lock.",
			actor, what, h.at(a.first), h.at(a.last), bound, since)
		stuck = append(stuck, v)
	}
	slices.SortStableFunc(stuck, func(a, b Violation) int { return cmp.Compare(a.From, b.From) })
	res.Keys = len(keys)
	res.Duration = time.Since(began)
	if granted == 0 {
		nothing := h.grantedNothing(sd, len(asked))
		if len(stuck) == 0 {
			res.Explanation = fmt.Sprintf("%s; but no client asked for longer than the bound of %v after %s, so none can be called stuck.", strings.TrimSuffix(nothing, "."), bound, since)
			return res
		}
		stuck = append([]Violation{{Check: histories.CheckLiveness, Kind: "no-grant", From: h.start, To: h.end, Story: nothing}}, stuck...)
	}
	if len(stuck) > 0 {
		res.Verdict = Invalid
		res.Violations = stuck
		var lines []string
		for i, v := range stuck {
			if i == 10 {
				lines = append(lines, fmt.Sprintf("(%d more stuck.)", len(stuck)-i))
				break
			}
			lines = append(lines, v.Story)
		}
		res.Explanation = strings.Join(lines, "\n")
		return res
	}
	if len(perClient) == 0 {
		res.Explanation = fmt.Sprintf("No client asked for a lock after %s: there is nothing to judge.", since)
		return res
	}
	anyGot := false
	for _, a := range perClient {
		anyGot = anyGot || a.got
	}
	if !anyGot {
		res.Explanation = fmt.Sprintf("No client was granted a lock after %s, and the %v from there to the end of the history are less than the bound of %v, so none can be called stuck either: the lock may have stopped granting. A quiet period longer than the bound judges it.",
			since, time.Duration(h.end-from).Round(time.Millisecond), bound)
		return res
	}
	res.Verdict = Valid
	return res
}

// grantedNothing says in words that the lock never granted.
func (h *History) grantedNothing(sd *storyData, clients int) string {
	acquires := 0
	for _, o := range h.ops {
		if o.f == histories.Acquire {
			acquires++
		}
	}
	s := fmt.Sprintf("The lock granted nothing: %s by %s from %s to %s, none granted",
		words.Plural(acquires, "acquire"), words.Plural(clients, "client"), h.at(h.start), h.at(h.end-1))
	if n := len(sd.lockerFailed); n > 0 {
		s += fmt.Sprintf("; clients could not build their locker %s (first: %s)", words.Times(n), sd.lockerFailed[0].err)
	}
	return s + "."
}
