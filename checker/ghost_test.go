package checker

import (
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// ghostRun: c1's acquire, whose create reply was lost, made its node
// twice (13, then 15); c2's node 14 waited behind 13. c1 gave up at 6 s
// and deleted 15, with 13 at the head of the queue (the observer's
// head_own); its session's close took 13 at 6.01 s and c2 was granted. Every
// wait is within the 7 s bound: only the ghost tells the stall. ghost
// gives 13's end and c2's grant's claim.
func ghostRun(headEnd, c2Claim string) *hist {
	h := (&hist{}).recorded(30, 1, 2).
		fault("lost-reply-acquire", []string{"c1"}, 1000, 1200).
		event("heal", 1300, nil, nil).
		grant(2, 100, 200, 10, 10, "/l/lock/lock-0000000010").rel(2, "lock", 300, 400, ok).
		deleted(350, "c2", 10, 12, "release", "node", "lock-0000000010", "lease", "b2", "process", "2").
		acq(1, "lock", 1000, 6000, info, 0).
		deleted(6000, "c1", 15, 20, "acquire", "node", "lock-0000000015", "lease", "a1", "process", "1",
			"head_own", "lock-0000000013", "head_own_revision", "13").
		deleted(6010, "c1", 13, 21, headEnd, "node", "lock-0000000013", "lease", "a1", "process", "1").
		grant(2, 1500, 6100, 14, 21, c2Claim).rel(2, "lock", 6200, 6300, ok).
		deleted(6250, "c2", 14, 22, "release", "node", "lock-0000000014", "lease", "b2", "process", "2")
	return h.read(9, "x", 15000, 15001, ok, 0)
}

func TestLivenessGhost(t *testing.T) {
	const bound = 7 * time.Second
	r := Liveness(ghostRun(histories.DeletedByRevoke, "/l/lock/lock-0000000014").ops(), bound)
	expect(t, r, Invalid, `Client c1 (process 1) gave up its wait for lock "lock" at 6.00 s behind a node of its own session a1: lock-0000000013 (created at revision 13, never granted)`,
		"went only when the session closed, at 6.01 s (revision 21)")
	if len(r.Violations) != 1 || r.Violations[0].Kind != "ghost" || r.Violations[0].Processes[0] != 1 {
		t.Errorf("violations %+v, want one ghost of process 1", r.Violations)
	}
	expect(t, Liveness(ghostRun(histories.DeletedByExpiry, "/l/lock/lock-0000000014").ops(), bound), Invalid, "went only when the session expired")
	for name, h := range map[string]*hist{
		// The client deleted the node itself: it knew it had it (a
		// clean-up retried in the background, as Curator's guaranteed
		// delete does).
		"deleted by its client": ghostRun(histories.DeletedByAcquire, "/l/lock/lock-0000000014"),
		// A grant whose node is not said: the observer cannot know which
		// nodes were granted.
		"a grant without its node": ghostRun(histories.DeletedByRevoke, ""),
		// The node was granted (a history the observer contradicts).
		"granted": ghostRun(histories.DeletedByRevoke, "/l/lock/lock-0000000013"),
	} {
		if r := Liveness(h.ops(), bound); r.Verdict != Valid {
			t.Errorf("%s: %s (%s), want valid", name, r.Verdict, r.Explanation)
		}
	}
	// A ghost is judged whenever it was: in a run cut short before its
	// final heal too.
	h := ghostRun(histories.DeletedByRevoke, "/l/lock/lock-0000000014")
	h.recs = h.recs[:len(h.recs)-1]
	var cut []histories.Op
	for _, op := range h.ops() {
		if op.F != "heal" {
			cut = append(cut, op)
		}
	}
	cut[0].Value.Params["end"] = histories.EndRecorded
	hh := Build(cut)
	rs := []Result{hh.Liveness(bound)}
	if c := hh.JudgeCut(rs, bound); c == nil || rs[0].Verdict != Invalid {
		t.Errorf("cut short before its heal: cut %v, %s (%s), want invalid", c, rs[0].Verdict, rs[0].Explanation)
	}
}
