package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
)

// Liveness checks a history; see History.Liveness.
func Liveness(ops []histories.Op, bound time.Duration) Result { return Build(ops).Liveness(bound) }

// Liveness checks that, after the final heal, every process that asked for a
// lock got it within bound. The final heal is the last nemesis "heal" event;
// without one, the whole run counts (from its first record).
//
// An acquire is judged from when it was asked for after the heal: its
// invocation, or the heal if it was waiting then. It is stuck if it had not
// returned ok by bound after that, and had not given up (fail or info)
// before: it returned later, or never. A process whose every acquire after
// the heal gave up, over more than bound, is stuck too. Acquires asked for
// less than bound before the end of the history are not judged. (A client
// continues under a new process number after an unknown outcome, and the
// history does not say which, so a client whose acquires keep timing out is
// seen as processes each giving up once; the lock's name and times in the
// story tell them apart.)
func (h *History) Liveness(bound time.Duration) Result {
	began := time.Now()
	res := Result{Name: "liveness", Verdict: Unknown}
	if h.err != nil {
		res.Explanation = "The history is malformed: " + h.err.Error() + "."
		return res
	}
	sd := h.story()
	from, since := h.start, "the start of the history"
	if sd.heal >= 0 {
		from, since = sd.heal, "the final heal at "+h.at(sd.heal)
	}
	keys := map[string]bool{}
	type attempts struct {
		key         string
		first, last int64
		n           int
		got         bool
	}
	perProc := map[histories.Process]*attempts{}
	var stuck []Violation
	for _, o := range h.ops {
		if o.f != histories.Acquire || o.ret < from && !o.missing {
			continue
		}
		asked := max(o.call, from)
		deadline := asked + int64(bound)
		if deadline >= h.end && o.missing {
			continue // still waiting at the end, but not yet for bound
		}
		res.Ops++
		keys[o.key] = true
		if o.unknown() {
			res.Unknown++
		}
		a := perProc[o.process]
		if a == nil {
			a = &attempts{key: o.key, first: asked}
			perProc[o.process] = a
		}
		a.n++
		a.last = max(a.last, o.ret)
		switch {
		case o.status == histories.OK && o.ret <= deadline:
			a.got = true
		case o.status != histories.OK && !o.missing && o.ret <= deadline:
			// Gave up in time; judged with the process's other attempts.
		default:
			v := Violation{Check: "liveness", Kind: "stuck", Key: o.key, Processes: []int{int(o.process)},
				From: asked, To: deadline, Faults: h.faultsDuring(asked, deadline)}
			s := fmt.Sprintf("Process %d asked for lock %q at %s and had not got it %v later, at %s (bound %v after %s)",
				o.process, o.key, h.at(asked), bound, h.at(deadline), bound, since)
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
	procs := make([]histories.Process, 0, len(perProc))
	for p := range perProc {
		procs = append(procs, p)
	}
	slices.Sort(procs)
	for _, p := range procs {
		a := perProc[p]
		if a.got || a.last-a.first <= int64(bound) {
			continue
		}
		v := Violation{Check: "liveness", Kind: "stuck", Key: a.key, Processes: []int{int(p)}, From: a.first, To: a.last,
			Faults: h.faultsDuring(a.first, a.last)}
		v.Story = fmt.Sprintf("Process %d asked for lock %q %s from %s to %s, more than the bound of %v after %s, and never got it.",
			p, a.key, times(a.n), h.at(a.first), h.at(a.last), bound, since)
		stuck = append(stuck, v)
	}
	slices.SortStableFunc(stuck, func(a, b Violation) int { return cmp.Compare(a.From, b.From) })
	res.Keys = len(keys)
	res.Verdict = Valid
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
	}
	res.Duration = time.Since(began)
	return res
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// MemberHash is one cluster member's hash of its key-value state at a
// revision, as collected after the run (etcd's HashKV), or why it could not
// be collected.
type MemberHash struct {
	Member   string `json:"member"`
	Revision int64  `json:"revision"`
	Hash     uint32 `json:"hash"`
	Err      string `json:"error,omitempty"`
}

// Consistency checks that all members agree on the final key-value state:
// the same hash at the same revision. A member that differs from the
// largest group (ties: the higher revision) is named as diverged: Invalid.
// A member that could not be reached makes the check Unknown, unless the
// others already disagree.
func Consistency(hashes []MemberHash) (res Result) {
	began := time.Now()
	res = Result{Name: "consistency", Verdict: Unknown, Ops: len(hashes)}
	defer func() { res.Duration = time.Since(began) }()
	if len(hashes) == 0 {
		res.Explanation = "No member hashes were collected."
		return res
	}
	type state struct {
		rev  int64
		hash uint32
	}
	groups := map[state][]string{}
	var unreachable []string
	for _, m := range hashes {
		if m.Err != "" {
			unreachable = append(unreachable, fmt.Sprintf("%s (%s)", m.Member, m.Err))
			continue
		}
		s := state{m.Revision, m.Hash}
		groups[s] = append(groups[s], m.Member)
	}
	var states []state
	for s := range groups {
		states = append(states, s)
	}
	slices.SortFunc(states, func(a, b state) int {
		return cmp.Or(cmp.Compare(len(groups[b]), len(groups[a])), cmp.Compare(b.rev, a.rev), cmp.Compare(a.hash, b.hash))
	})
	var lines []string
	if len(states) > 1 {
		ref := states[0]
		res.Verdict = Invalid
		for _, s := range states[1:] {
			v := Violation{Check: "consistency", Kind: "diverged", Members: groups[s]}
			v.Story = fmt.Sprintf("Member %s diverged: hash %08x at revision %d, while %s %s hash %08x at revision %d.",
				strings.Join(groups[s], ", "), s.hash, s.rev, strings.Join(groups[ref], ", "), hasHave(len(groups[ref])), ref.hash, ref.rev)
			res.Violations = append(res.Violations, v)
			lines = append(lines, v.Story)
		}
	}
	if len(unreachable) > 0 {
		lines = append(lines, "Could not compare "+strings.Join(unreachable, ", ")+".")
	} else if res.Verdict == Unknown {
		res.Verdict = Valid
	}
	res.Explanation = strings.Join(lines, "\n")
	if res.Verdict == Valid {
		res.Explanation = ""
	}
	return res
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
