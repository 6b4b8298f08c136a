// Narration: violations told in plain words, with the faults active then.

package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
)

// Describer says in words what a fault of kind fault, with its params, did to its targets
// ("c4 was paused"), for stories; false for a kind it does not know. The
// checker knows no fault kinds itself: its caller sets one on the Builder
// (the harness passes nemesis.Describe).
type Describer func(fault string, targets []string, params map[string]string) (phrase string, ok bool)

// phrase says what a fault did, in words: the Describer's phrase, or a
// generic one.
func (h *History) phrase(f Fault) string {
	if h.describe != nil {
		// What the fault found as it ended (its Outcome) tells more than
		// what it set out to do: a lost reply learns at its end whether
		// the server answered the request.
		params := f.Params
		if len(f.Outcome) > 0 {
			params = maps.Clone(f.Params)
			if params == nil {
				params = map[string]string{}
			}
			maps.Copy(params, f.Outcome)
		}
		if p, ok := h.describe(f.Fault, f.Targets, params); ok {
			return p
		}
	}
	t := strings.Join(f.Targets, ", ")
	if t == "" {
		t = "the cluster"
	}
	return fmt.Sprintf("fault %s on %s was active", f.Fault, t)
}

// describeFault is a fault's phrase with its times.
func (h *History) describeFault(f Fault) string {
	switch {
	case h.at(f.Start) == h.at(f.End): // not "2.02-2.02 s"
		return fmt.Sprintf("%s at %s", h.phrase(f), h.at(f.Start))
	case f.Unended:
		return fmt.Sprintf("%s from %s to the end", h.phrase(f), h.at(f.Start))
	}
	return fmt.Sprintf("%s %.2f-%s", h.phrase(f), float64(f.Start-h.origin())/1e9, h.at(f.End))
}

// describeFaults describes up to five faults, and says how many more.
func (h *History) describeFaults(fs []Fault) string {
	var out []string
	for i, f := range fs {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(fs)-i))
			break
		}
		out = append(out, h.describeFault(f))
	}
	return strings.Join(out, "; ")
}

// who names a process in a story: "process 7 (c2)" when the history says
// which client it belongs to.
func (h *History) who(p histories.Process) string {
	if c, ok := h.story().clients[p]; ok {
		return fmt.Sprintf("process %d (%s)", p, c)
	}
	return fmt.Sprintf("process %d", p)
}

// event is one step of a story.
type event struct {
	t    int64
	text string
}

// tell joins events in time order into one sentence.
func tell(lead string, evs []event) string {
	if len(evs) == 0 {
		return strings.TrimSuffix(strings.TrimSuffix(lead, "What happened: "), " ")
	}
	slices.SortStableFunc(evs, func(a, b event) int { return cmp.Compare(a.t, b.t) })
	var parts []string
	for _, e := range evs {
		if len(parts) > 0 && parts[len(parts)-1] == e.text {
			continue
		}
		parts = append(parts, e.text)
	}
	return lead + strings.Join(parts, "; ") + "."
}

// scene gathers the events around some holds of one key: their grants, the
// faults active, the server's deletions and lost leases of their tokens,
// their writes, and how each belief ended.
func (h *History) scene(key string, beliefs []Belief, writers []histories.Process, from, to int64) []event {
	sd := h.story()
	var evs []event
	tokens := map[int64]int{} // token → process
	procs := map[histories.Process]bool{}
	for _, p := range writers {
		procs[p] = true
	}
	for _, b := range beliefs {
		procs[histories.Process(b.Process)] = true
		if b.HasToken {
			tokens[b.Token] = b.Process
			evs = append(evs, event{b.From, fmt.Sprintf("%s acquired token %d at %s", h.who(histories.Process(b.Process)), b.Token, h.at(b.From))})
		} else {
			evs = append(evs, event{b.From, fmt.Sprintf("%s acquired the lock at %s", h.who(histories.Process(b.Process)), h.at(b.From))})
		}
		switch b.Ended {
		case histories.DeletedByRelease:
			evs = append(evs, event{b.To, fmt.Sprintf("%s released the lock at %s", h.who(histories.Process(b.Process)), h.at(b.To))})
		case "last-seen":
			evs = append(evs, event{b.To, fmt.Sprintf("%s was last seen acting as holder at %s", h.who(histories.Process(b.Process)), h.at(b.To))})
		}
	}
	for i, f := range h.faultsDuring(from, to) {
		if i == 5 {
			break
		}
		evs = append(evs, event{f.Start, h.describeFault(f)})
	}
	for _, d := range sd.deletions {
		p, ok := tokens[d.Token]
		if d.Key != "" && d.Key != key || !ok {
			continue
		}
		why := ""
		switch d.By {
		case histories.DeletedByExpiry:
			why = h.terms().Expired
			if h.revokedAt(d) {
				why = ": the nemesis revoked its lease"
			}
		case histories.DeletedByRelease:
			why = ": released"
		case histories.DeletedByRevoke:
			why = ": its session was closed"
		case histories.DeletedByAcquire:
			why = ": cleaned up after a failed wait"
		case histories.DeletedByOther:
			why = releasedBy(d)
		}
		evs = append(evs, event{d.Time, fmt.Sprintf("the server deleted %s's lock %s (token %d) at %s%s", h.who(histories.Process(p)), h.terms().key(), d.Token, h.at(d.Time), why)})
	}
	for _, l := range sd.lost {
		if p, ok := tokens[l.token]; ok && l.key == key {
			evs = append(evs, event{l.time, fmt.Sprintf(h.terms().Noticed, h.who(histories.Process(p)), h.at(l.time))})
		}
	}
	// Writes of these processes to the key while the story lasts, in the
	// order they completed.
	var writes []*operation
	for _, o := range h.ops {
		if o.f != histories.Write || o.key != key || !procs[o.process] || o.call < from || o.call > to {
			continue
		}
		// Only the writes made under the grants the story is about: a
		// holder's later cycles would bury them.
		if _, told := tokens[o.tok]; len(tokens) > 0 && o.hasTok && !told {
			continue
		}
		writes = append(writes, o)
	}
	slices.SortStableFunc(writes, func(a, b *operation) int { return cmp.Compare(a.ret, b.ret) })
	var acc []*operation // accepted so far
	for _, o := range writes {
		tok := ""
		if o.hasTok {
			tok = fmt.Sprintf(" with token %d", o.tok)
		}
		switch o.status {
		case histories.OK:
			text := fmt.Sprintf("the resource accepted %s's write%s at %s", h.who(o.process), tok, h.at(o.ret))
			for _, a := range acc {
				if o.hasTok && a.hasTok && a.tok > o.tok && a.ret < o.call {
					text += fmt.Sprintf(", after %s's write with token %d at %s", h.who(a.process), a.tok, h.at(a.ret))
					break
				}
			}
			acc = append(acc, o)
			evs = append(evs, event{o.ret, text})
		case histories.Fail:
			evs = append(evs, event{o.ret, fmt.Sprintf("the resource rejected %s's write%s at %s", h.who(o.process), tok, h.at(o.ret))})
		default:
			evs = append(evs, event{o.call, fmt.Sprintf("%s's write%s invoked at %s had an unknown outcome", h.who(o.process), tok, h.at(o.call))})
		}
	}
	return evs
}

// overlapViolation tells the story of two processes holding a lock at once.
func (h *History) overlapViolation(o Overlap) Violation {
	a, b := o.First, o.Second
	to := max(a.To, b.To)
	v := Violation{Check: histories.CheckMutex, Kind: "overlap", Key: o.Key, Processes: []int{a.Process, b.Process},
		From: o.From, To: o.To, Faults: h.faultsDuring(a.From, to)}
	for _, x := range []Belief{a, b} {
		if x.HasToken {
			v.Tokens = append(v.Tokens, x.Token)
		}
	}
	lead := fmt.Sprintf("On key %q, %s and %s both believed they held the lock %s: ",
		o.Key, h.who(histories.Process(a.Process)), h.who(histories.Process(b.Process)), h.during(o.From, o.To))
	v.Story = tell(lead, h.scene(o.Key, []Belief{a, b}, nil, a.From, to)) + h.classWords(o)
	return v
}

// classWords says, after an overlap's story, which class the contract
// check gave it: only an overlap that began after the earlier holder's
// claim was gone is the race every lock of its kind has.
func (h *History) classWords(o Overlap) string {
	t := h.terms()
	switch h.OverlapClass(o) {
	case ClassLeaseRace:
		return fmt.Sprintf(" This overlap was %s: the earlier holder's %s was gone from the server before the later grant was decided.", t.Race, t.key())
	case ClassLockBug:
		return fmt.Sprintf(" This overlap was the lock's bug, not %s: the earlier holder's %s was still on the server when the later grant was decided (contract, promise 3).", t.Race, t.key())
	case ClassOtherRelease:
		return fmt.Sprintf(" This overlap was the lock's bug: another grant's release deleted the earlier holder's %s (contract, promise 4).", t.key())
	case ClassUndecided:
		return fmt.Sprintf(" Whether this overlap was %s or the lock's bug cannot be told: the history does not say whether the earlier holder's %s was gone when the later grant was decided (see contract).", t.Race, t.key())
	}
	return ""
}

// maxStories caps the direct violations a check tells.
const maxStories = 5

// mutexViolations finds overlapping holders and grants out of token order.
func (h *History) mutexViolations() []Violation {
	var out []Violation
	an := h.Overlaps()
	for i, o := range an.Overlaps {
		if i == maxStories {
			break
		}
		out = append(out, h.overlapViolation(o))
	}
	if n := len(an.Overlaps); n > maxStories {
		more := fmt.Sprintf("%d", n-maxStories)
		if an.Truncated {
			more = "at least " + more
		}
		// Not a violation of its own (no key, no time): the report lists
		// it as a count.
		out = append(out, Violation{Check: histories.CheckMutex, Kind: "overlap", Story: fmt.Sprintf("and %s more overlaps (pairs of processes that believed they held a lock at once), in results.json", more)})
	}
	var grants []tokened
	for _, o := range h.ops {
		// A token that is no fencing token promises no order.
		if o.f == histories.Acquire && o.status == histories.OK && o.hasTok && !h.story().noFencingToken {
			grants = append(grants, tokened{o, o.tok})
		}
	}
	if a, b, ok := regression(grants, true); ok {
		v := Violation{Check: histories.CheckMutex, Kind: "token-order", Key: b.o.key, Processes: []int{int(a.o.process), int(b.o.process)},
			Tokens: []int64{a.token, b.token}, From: a.o.ret, To: b.o.ret, Faults: h.faultsDuring(a.o.ret, b.o.ret)}
		lead := fmt.Sprintf("On key %q, %s was granted token %d at %s, after %s had been granted token %d at %s: tokens must grow with each grant. ",
			b.o.key, h.who(b.o.process), b.token, h.at(b.o.ret), h.who(a.o.process), a.token, h.at(a.o.ret))
		var bs []Belief
		for _, g := range []tokened{a, b} {
			if x, ok := h.beliefOf(g.o); ok {
				bs = append(bs, x)
			}
		}
		v.Story = tell(lead+"What happened: ", h.scene(b.o.key, bs, nil, a.o.ret, b.o.ret))
		out = append(out, v)
	}
	return out
}

// staleWriteViolation tells the story of the resource accepting a write with
// a lower token after one with a higher token.
func (h *History) staleWriteViolation(a, b tokened) Violation {
	av, _ := a.o.value()
	bv, _ := b.o.value()
	v := Violation{Check: histories.CheckResource, Kind: "stale-write", Key: b.o.key, Processes: []int{int(b.o.process), int(a.o.process)},
		Tokens: []int64{b.token, a.token}, From: a.o.ret, To: b.o.ret}
	accepted := "accepted " + h.at(b.o.ret)
	if b.o.applied {
		accepted = "its client gave up on it at " + h.at(b.o.ret) + ", but the resource's log shows it accepted"
	}
	lead := fmt.Sprintf("On key %q, the resource accepted %s's write of %d with token %d (invoked %s, %s), although %s's write of %d with the higher token %d had been accepted by %s. ",
		b.o.key, h.who(b.o.process), bv, b.token, h.at(b.o.call), accepted, h.who(a.o.process), av, a.token, h.at(a.o.ret))
	var bs []Belief
	from, to := a.o.call, b.o.ret
	for _, w := range []tokened{b, a} {
		if x, ok := h.holderOf(w.o.key, w.o.process, w.token); ok {
			bs = append(bs, x)
			from = min(from, x.From)
		}
	}
	v.Faults = h.faultsDuring(from, to)
	v.Story = tell(lead+"What happened: ", h.scene(b.o.key, bs, []histories.Process{a.o.process, b.o.process}, from, to))
	return v
}

// origin is the time shown as 0 s: 0, unless the history's clock starts far
// from it (more than an hour in, as with Unix-epoch times in a hand-written
// history), in which case its first record.
func (h *History) origin() int64 {
	if h.start > int64(time.Hour) {
		return h.start
	}
	return 0
}

// at formats a history time in seconds, with two decimals.
func (h *History) at(ns int64) string {
	return fmt.Sprintf("%.2f s", float64(ns-h.origin())/1e9)
}

// during says when something lasting from..to happened: "from 5.44 s to
// 7.10 s", or, shorter than a tenth of a second, "for 3 ms from 5.437 s"
// (not "from 5.44 s to 5.44 s").
func (h *History) during(from, to int64) string {
	if d := time.Duration(to - from); d < 100*time.Millisecond {
		return fmt.Sprintf("for %d ms from %s", d.Round(time.Millisecond).Milliseconds(), h.at3(from))
	}
	return fmt.Sprintf("from %s to %s", h.at(from), h.at(to))
}

// at3 formats a history time in seconds, with three decimals.
func (h *History) at3(ns int64) string {
	return fmt.Sprintf("%.3f s", float64(ns-h.origin())/1e9)
}
