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
// which (a process no event names is a client of its own). A client's wait
// runs from when it asked after the heal (its first acquire's invocation,
// or the heal if it was waiting then) until it was granted, across its
// definite failures, its failures to build a locker ("locker-failed"
// events) and its retries. Only the lock's idle time in a wait counts:
// time in which nobody held the lock (from a grant until its release
// returned, or the holder was last seen) and nobody was granted it. A wait
// with an idle stretch longer than bound is a violation, named with the
// client's attempts, whether the client was granted late, gave up, or was
// still waiting when the history ended. Idle stretches on either side of
// a grant to another do not add up: a correct lock, fair or not, may keep
// a client waiting behind any number of others' grants and sections, and
// is stuck only when it stops making progress. An unknown outcome (info)
// of an acquire in flight when the last fault ended restarts the wait at
// the client's next ask: a fault may have hidden a grant (a lost reply).
// One invoked after it does not: no fault can hide a grant then, so the
// lock did not answer in time and the client, asking again, still waits.
// Waits still open less than bound before the end of the history are not
// judged, nor are waits whose idle stretch saw locktest's own process
// stalled for bound/stallShare or more in all: a machine that did not run
// locktest did not run the lock's processes either; nor are those in
// whose idle stretch the client's own lock process (a lock in a process
// of its own: starved events) waited to run for as long: a starved lock
// is slow, not stuck. The verdict is then unknown, unless another wait
// was stuck.
//
// A history with no acquire and no locker failure is unknown: there is
// nothing to judge; one in which the lock granted nothing at all says so,
// and is invalid if a client was stuck, else unknown.
//
// Besides, at any time, faults or not: a client that gave up waiting
// behind a node of its own session that it did not know it had (a ghost:
// see ghosts) is a violation, and so is a node a definite refusal left in
// line (an orphan: see orphans), and a node that headed its lock's queue,
// calm, for a TTL without its owner being granted (unwoken); a history
// that tells one is invalid.
func (h *History) Liveness(bound time.Duration) Result {
	res := h.liveness(bound)
	if h.err != nil {
		return res
	}
	if gs := h.ghosts(); len(gs) > 0 {
		lines := []string{}
		for _, g := range gs {
			lines = append(lines, g.Story)
		}
		if res.Verdict == Invalid {
			lines = append(lines, res.Explanation)
		}
		res.Verdict, res.Violations = Invalid, append(gs, res.Violations...)
		res.Explanation = strings.Join(lines, "\n")
	}
	return res
}

func (h *History) liveness(bound time.Duration) Result {
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
	// A client's wait runs from when it asked (or from, if it was asking
	// then) until it was granted, across its definite failures, its
	// locker failures and its retries: tries are a client's attempts after
	// from, in the order it made them.
	tries := map[string][]try{}
	for _, o := range h.ops {
		if o.f == histories.Acquire && (o.ret >= from || o.missing) {
			c := name(o.process)
			tries[c] = append(tries[c], try{op: o, call: o.call, ret: o.ret})
		}
	}
	for _, f := range sd.lockerFailed {
		if f.time >= from {
			tries[f.client] = append(tries[f.client], try{call: f.time, ret: f.time, lockerErr: f.err})
		}
	}
	keys := map[string]bool{}
	held := h.holds()
	var stuck []Violation
	var starved []string // waits past the bound that a loaded machine explains
	anyGot := false
	clients := slices.Sorted(maps.Keys(tries))
	for _, c := range clients {
		ts := tries[c]
		slices.SortStableFunc(ts, func(a, b try) int { return cmp.Compare(a.call, b.call) })
		var w []try // the wait in progress
		// end closes the wait at e: a violation if it ran past the bound.
		end := func(e int64) {
			if len(w) == 0 {
				return
			}
			start := max(w[0].call, from)
			if idle, ok := idleStretch(held.of(w), start, e, bound); ok {
				actor := "Client " + c
				if strings.HasPrefix(c, "process ") { // no process event named its client
					actor = "P" + c[1:]
				}
				if total, longest := h.stalled(idle.from, idle.to); total >= bound/stallShare {
					starved = append(starved, fmt.Sprintf("%s waited for the lock from %s to %s, nobody holding it, longer than the bound of %v after %s; but locktest's own process was not run for %v in that time (the longest stall %v, from %s), so the machine ran the lock's processes no better: a slow lock cannot be told from a stuck one.",
						actor, h.at(idle.from), h.at(idle.to), bound, since, total.Round(time.Millisecond), time.Duration(longest.End-longest.Start).Round(time.Millisecond), h.at(longest.Start)))
					w = nil
					return
				}
				if waited := h.starvedFor(c, idle.from, idle.to); waited >= bound/stallShare {
					starved = append(starved, fmt.Sprintf("%s waited for the lock from %s to %s, nobody holding it, longer than the bound of %v after %s; but its lock process waited to run for %v of those %v (a thread of it runnable, the machine running others), so a slow lock cannot be told from a stuck one.",
						actor, h.at(idle.from), h.at(idle.to), bound, since, waited.Round(time.Millisecond), time.Duration(idle.to-idle.from).Round(time.Millisecond)))
					w = nil
					return
				}
				v := h.waitedTooLong(c, w, start, e, idle, bound, since, who)
				res.Ops += v.judged
				stuck = append(stuck, v.Violation)
			} else {
				for _, t := range w {
					if t.op != nil && !t.op.missing {
						res.Ops++
					}
				}
			}
			w = nil
		}
		for _, t := range ts {
			w = append(w, t)
			o := t.op
			if o == nil {
				continue
			}
			keys[o.key] = true
			if o.unknown() && !o.missing {
				res.Unknown++
			}
			switch {
			case o.status == histories.OK:
				anyGot = true
				end(o.ret)
			case o.unknown() && !o.missing && o.call < from:
				// In flight when the last fault ended: a fault may have
				// hidden a grant (a lost reply), so the wait restarts at
				// the client's next ask. After that no fault can: an
				// unknown outcome is the lock not answering in time, and
				// the client, asking again, is still waiting.
				end(o.ret)
			}
		}
		last := int64(0)
		for _, t := range w {
			last = max(last, t.ret)
		}
		end(last)
	}
	slices.SortStableFunc(stuck, func(a, b Violation) int { return cmp.Compare(a.From, b.From) })
	res.Keys = len(keys)
	res.Duration = time.Since(began)
	if len(stuck) == 0 && len(starved) > 0 {
		res.Explanation = strings.Join(starved, "\n")
		return res
	}
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
	if len(tries) == 0 {
		res.Explanation = fmt.Sprintf("No client asked for a lock after %s: there is nothing to judge.", since)
		return res
	}
	if !anyGot {
		quiet := time.Duration(h.end - from)
		res.Explanation = fmt.Sprintf("No client was granted a lock after %s, and the %v from there to the end of the history are less than the bound of %v, so none can be called stuck either: the lock may have stopped granting. A quiet period longer than the bound judges it.",
			since, quiet.Round(time.Millisecond), bound)
		if quiet > bound {
			res.Explanation = fmt.Sprintf("No client was granted a lock after %s, yet in the %v from there to the end of the history no client waited longer than the bound of %v while the lock was free (a grant never released counts as held until its holder was last seen), so none can be called stuck either: the lock may have stopped granting.",
				since, quiet.Round(time.Millisecond), bound)
		}
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

// try is one of a client's attempts to get a lock: an acquire (op), or a
// failure to build its locker (op nil, lockerErr set, at call).
type try struct {
	op        *operation
	call, ret int64
	lockerErr string
}

// span is a time in which a client held a lock: from its grant until its
// release returned, or, never released, until the holder was last seen.
type span struct {
	from, to int64
	holder   histories.Process
	released bool
}

// spans are holds in order of their start; toMax[i] is the latest end of
// the first i+1, to find those that reach past a time.
type spans struct {
	s     []span
	toMax []int64
}

func newSpans(s []span) spans {
	slices.SortStableFunc(s, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	toMax := make([]int64, len(s))
	for i, x := range s {
		toMax[i] = x.to
		if i > 0 {
			toMax[i] = max(x.to, toMax[i-1])
		}
	}
	return spans{s, toMax}
}

// heldSpans are the holds of each key, and of all keys together.
type heldSpans struct {
	byKey map[string]spans
	all   spans
}

// holds returns who held each key's lock when: the time a correct lock may
// keep a waiter waiting, whatever its order of grants. A release in flight
// holds it still (the server frees the key at some time before its reply),
// one the history ended before answering does not.
func (h *History) holds() heldSpans {
	byKey := map[string][]span{}
	var all []span
	holding := map[hold]*operation{}
	add := func(a *operation, to int64, released bool) {
		s := span{from: a.ret, to: max(to, a.ret), holder: a.process, released: released}
		byKey[a.key] = append(byKey[a.key], s)
		all = append(all, s)
	}
	for _, o := range h.ops {
		k := hold{o.process, o.key}
		switch {
		case o.f == histories.Acquire && o.status == histories.OK:
			if a := holding[k]; a != nil { // acquired again without releasing
				add(a, o.call, false)
			}
			holding[k] = o
		case o.f == histories.Release:
			if a := holding[k]; a != nil {
				to := o.ret
				if o.missing {
					to = o.call
				}
				add(a, to, true)
				delete(holding, k)
			}
		}
	}
	for _, k := range sortedHolds(holding) {
		add(holding[k], h.alive[k.p], false)
	}
	out := heldSpans{byKey: map[string]spans{}, all: newSpans(all)}
	for k, s := range byKey {
		out.byKey[k] = newSpans(s)
	}
	return out
}

// of returns the holds of the key wait w asked for; of every key if it
// asked for several, or none (its locker was never built): any grant then
// may be what it waited behind.
func (hs heldSpans) of(w []try) spans {
	key := ""
	for _, t := range w {
		switch {
		case t.op == nil:
		case key == "":
			key = t.op.key
		case key != t.op.key:
			return hs.all
		}
	}
	if key == "" {
		return hs.all
	}
	return hs.byKey[key]
}

// idle is a time in a wait in which nobody held the lock or was granted
// it: from the wait's start or the end of a hold (after), to a grant or
// the wait's end.
type idle struct {
	from, to int64
	after    *span
}

// idleStretch returns the first idle time longer than bound in the wait
// from start to e, if any: the lock made no progress then, which no order
// of grants explains. Time in which others held the lock is not counted,
// nor does idle time before a grant to another add up with idle time after
// it: a waiter behind others' grants and sections, however many, is not
// stuck while the lock goes on granting.
func idleStretch(held spans, start, e int64, bound time.Duration) (idle, bool) {
	cur := start
	var after *span
	// Holds before the first that reaches past start cover none of the
	// wait.
	first, _ := slices.BinarySearch(held.toMax, start+1)
	for i := first; i < len(held.s); i++ {
		s := &held.s[i]
		if s.from >= e {
			break
		}
		if s.from > cur && s.from-cur > int64(bound) {
			return idle{from: cur, to: s.from, after: after}, true
		}
		if s.to > cur {
			cur, after = s.to, s
		}
	}
	if e-cur > int64(bound) {
		return idle{from: cur, to: e, after: after}, true
	}
	return idle{}, false
}

// freed says in words how span s ended, as "when ...".
func freed(s *span) string {
	if s.released {
		return fmt.Sprintf("when process %d released it", s.holder)
	}
	return fmt.Sprintf("when process %d, its holder, was last seen", s.holder)
}

// stuckWait is a wait that ran past the bound, and how many acquires it
// judged.
type stuckWait struct {
	Violation
	judged int
}

// waitedTooLong tells of client c's wait w, from start to e, in which the
// lock was idle longer than bound after since.
func (h *History) waitedTooLong(c string, w []try, start, e int64, in idle, bound time.Duration, since string, who func(string, histories.Process) string) stuckWait {
	deadline := addSat(in.from, int64(bound))
	var r stuckWait
	var key, lockerErr string
	acquires, failed := 0, 0
	for _, t := range w {
		if t.op == nil {
			failed++
			lockerErr = cmp.Or(lockerErr, t.lockerErr)
			continue
		}
		acquires++
		r.judged++
		key = cmp.Or(key, t.op.key)
		if p := int(t.op.process); len(r.Processes) == 0 || r.Processes[len(r.Processes)-1] != p {
			r.Processes = append(r.Processes, p)
		}
	}
	r.Violation = Violation{Check: histories.CheckLiveness, Kind: "stuck", Key: key, Processes: r.Processes,
		From: in.from, To: e, Faults: h.faultsDuring(in.from, e)}
	// idleWords tells of the idle time, when it began after a hold ended
	// in the wait.
	idleWords := ""
	if in.after != nil {
		idleWords = fmt.Sprintf("from %s, %s, to %s nobody held it or was granted it, %v: ",
			h.at(in.from), freed(in.after), h.at(in.to), time.Duration(in.to-in.from).Round(time.Millisecond))
	}
	got := w[len(w)-1].op != nil && w[len(w)-1].op.status == histories.OK
	var s string
	switch {
	case len(w) == 1 && acquires == 1:
		o := w[0].op
		r.To = deadline
		r.Faults = h.faultsDuring(in.from, deadline)
		if in.after == nil {
			s = fmt.Sprintf("%s asked for lock %q at %s and had not got it %v later, at %s (bound %v after %s)",
				who(c, o.process), o.key, h.at(start), bound, h.at(deadline), bound, since)
		} else {
			s = fmt.Sprintf("%s asked for lock %q at %s and had not got it at %s, %v after %s, nobody holding it or granted it in between (bound %v after %s)",
				who(c, o.process), o.key, h.at(start), h.at(deadline), bound, strings.TrimPrefix(freed(in.after), "when "), bound, since)
		}
		switch {
		case o.missing:
			s += fmt.Sprintf("; it was still waiting when the history ended at %s", h.at(h.end-1))
		case o.status == histories.OK:
			s += fmt.Sprintf("; it got it only at %s", h.at(o.ret))
		default:
			s += fmt.Sprintf("; it gave up (%s) at %s", o.status, h.at(o.ret))
		}
		if len(r.Faults) > 0 {
			s += "; faults active then: " + h.describeFaults(r.Faults)
		}
		r.Story = s + "."
		return r
	case got:
		asked := "asked for lock %q at %s"
		if w[0].call < start {
			asked = "was asking for lock %q when the wait began at %s"
		}
		s = fmt.Sprintf("%s "+asked+" and got it only at %s, %v later, over %s: %s; %smore than the bound of %v after %s.",
			clientActor(c), key, h.at(start), h.at(e), time.Duration(e-start).Round(time.Millisecond),
			words.Plural(len(w), "attempt"), h.attemptsInWords(w), idleWords, bound, since)
	default:
		what := fmt.Sprintf("asked for lock %q %s", key, words.Times(acquires))
		if failed > 0 {
			what = fmt.Sprintf("could not build its locker %s (%s)", words.Times(failed), lockerErr)
			if acquires > 0 {
				what = fmt.Sprintf("asked for lock %q %s and could not build its locker %s (%s)", key, words.Times(acquires), words.Times(failed), lockerErr)
			}
		}
		if in.after == nil {
			s = fmt.Sprintf("%s %s from %s to %s, more than the bound of %v after %s, and never got the lock.",
				clientActor(c), what, h.at(w[0].call), h.at(e), bound, since)
		} else {
			s = fmt.Sprintf("%s %s from %s to %s and never got the lock; %smore than the bound of %v after %s.",
				clientActor(c), what, h.at(w[0].call), h.at(e), idleWords, bound, since)
		}
	}
	r.Story = s
	return r
}

// clientActor names client c at the start of a sentence.
func clientActor(c string) string {
	if strings.HasPrefix(c, "process ") {
		return "P" + c[1:]
	}
	return "Client " + c
}

// attemptsInWords lists a wait's attempts, at most six of them.
func (h *History) attemptsInWords(w []try) string {
	var parts []string
	for i, t := range w {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("%d more", len(w)-i))
			break
		}
		o := t.op
		if o == nil {
			parts = append(parts, fmt.Sprintf("its locker could not be built at %s (%s)", h.at(t.call), t.lockerErr))
			continue
		}
		s := fmt.Sprintf("process %d asked at %s", o.process, h.at(o.call))
		switch {
		case o.missing:
			s += ", still waiting at the end"
		case o.status == histories.OK:
			s += ", granted at " + h.at(o.ret)
		case o.status == histories.Fail:
			s += ", failed at " + h.at(o.ret)
		default:
			s += ", outcome unknown at " + h.at(o.ret)
		}
		if err := h.errs[o]; err != "" {
			s += " (" + err + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// livenessCut is the liveness check's rule for a history cut short: it is
// judged after the final heal, over the quiet period that follows it,
// which the cut ended.
func livenessCut(h *History, r Result, c *Cut, bound time.Duration) string {
	at := h.at(c.Time)
	from, since := h.start, "the start"
	if heal := h.story().heal; heal >= 0 {
		from, since = heal, "the final heal"
	}
	switch {
	case slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Kind == "ghost" || v.Kind == "orphan" || v.Kind == "unwoken" }):
		// A ghost, an orphan or an unwoken waiter is judged whenever it was, from the records
		// there.
		return ""
	case h.unhealed():
		return fmt.Sprintf("The run was cut short at %s, before its final heal: liveness is judged only after it.", at)
	case r.Verdict == Valid:
		return fmt.Sprintf("The run was cut short at %s, %s after %s: acquires asked in its last %v could not be judged, and the rest of its quiet period was not recorded (until then, no client that asked waited on an idle lock longer than the bound).",
			at, fmt.Sprintf("%.2f s", time.Duration(c.Time-from).Seconds()), since, bound)
	}
	// A lock that granted nothing is judged so by the liveness check only
	// once an acquire waited the bound: a cut before leaves it unknown.
	return ""
}

// livenessLine is the liveness check's summary: the acquires judged, and
// from when, as the run had faults or not.
func livenessLine(r Result, h *History) string {
	from := "once every fault had ended"
	// A stall is no fault.
	if h != nil && len(h.Faults()) == 0 && len(h.Events()) == len(h.sd.stalls) {
		from = "from the start (a run without faults)"
	}
	return fmt.Sprintf("%d acquires judged %s", r.Ops, from)
}
