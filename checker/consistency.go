// The consistency check: do the members agree on their final state.

package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
)

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
	res = Result{Name: histories.CheckConsistency, Verdict: Unknown, Ops: len(hashes)}
	defer func() { res.Duration = time.Since(began) }()
	if len(hashes) == 0 {
		res.Explanation = "No member hashes: the history alone does not hold the members' final state (a run directory's results.json does), so nothing was compared."
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
			v := Violation{Check: histories.CheckConsistency, Kind: "diverged", Members: groups[s]}
			v.Story = fmt.Sprintf("Member %s diverged: hash %08x at revision %d, while %s %s hash %08x at revision %d.",
				strings.Join(groups[s], ", "), s.hash, s.rev, strings.Join(groups[ref], ", "), words.Form(len(groups[ref]), "has", "have"), ref.hash, ref.rev)
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

// consistencyCut is the consistency check's rule for a history cut short:
// the members' hashes are taken at the end, so a run cut short compared
// none (hashes taken all the same, the run ending as it should after its
// history was cut off, are judged as they are).
func consistencyCut(h *History, r Result, c *Cut, _ time.Duration) string {
	if r.Ops == 0 {
		return fmt.Sprintf("The run was cut short at %s, before the members' hashes were taken: nothing was compared.", h.at(c.Time))
	}
	return ""
}

// consistencyLine is the consistency check's summary.
func consistencyLine(r Result, _ *History) string {
	return fmt.Sprintf("%d members compared", r.Ops)
}
