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
	invalidCutShort(t, h.ops(), 0)
}

// invalidCutShort judges ops without their heal, and those from before
// (0: all), as a run cut short, and wants liveness invalid.
func invalidCutShort(t *testing.T, ops []histories.Op, before int64) {
	const bound = 7 * time.Second
	t.Helper()
	var cut []histories.Op
	for _, op := range ops {
		if op.F != "heal" && (before == 0 || op.Time < before) {
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

// orphanRun: c1's acquire (node 13) was refused definitely at 4 s while
// its links were cut, and its clean-up's error was swallowed: 13 stayed in
// line. c1's next acquire, on the same session, made 15 behind it and
// timed out (unknown) at 9.01 s; the session expired at 11 s with 13 and
// 15. c2's node 14 waited behind 13 and was granted at 11.1 s. The final
// heal is at 12 s: no wait in the stall is judged, only the orphan tells
// it.
// later is 15's session and oldBy how 13 went.
func orphanRun(later, oldBy string) *hist {
	h := (&hist{}).recorded(30, 1, 2).
		fault("isolate", []string{"c1"}, 3100, 4000).
		event("heal", 12000, nil, nil).
		grant(2, 100, 200, 10, 10, "/l/lock/lock-0000000010").rel(2, "lock", 300, 400, ok).
		deleted(350, "c2", 10, 12, "release", "node", "lock-0000000010", "lease", "b2", "process", "2").
		acq(1, "lock", 1000, 4000, fail, 0).
		acq(1, "lock", 4010, 9010, info, 0).
		deleted(11000, "c1", 13, 30, oldBy, "node", "lock-0000000013", "lease", "a1", "process", "1").
		deleted(11000, "c1", 15, 30, histories.DeletedByExpiry, "node", "lock-0000000015", "lease", later, "process", "1").
		grant(2, 1500, 11100, 14, 31, "/l/lock/lock-0000000014").rel(2, "lock", 11200, 11300, ok).
		deleted(11250, "c2", 14, 32, "release", "node", "lock-0000000014", "lease", "b2", "process", "2").
		grant(2, 13000, 13100, 40, 40, "/l/lock/lock-0000000040").rel(2, "lock", 13200, 13300, ok)
	return h.read(9, "x", 25000, 25001, ok, 0)
}

func TestLivenessOrphan(t *testing.T) {
	const bound = 7 * time.Second
	r := Liveness(orphanRun("a1", histories.DeletedByExpiry).ops(), bound)
	expect(t, r, Invalid, `Client c1 (process 1) was refused lock "lock" definitely at 4.00 s`,
		"session a1's node lock-0000000013 (created at revision 13, never granted) was still in the lock's queue when the same session created lock-0000000015 (revision 15), and went only when the session expired, at 11.00 s")
	if len(r.Violations) != 1 || r.Violations[0].Kind != "orphan" || r.Violations[0].Processes[0] != 1 {
		t.Errorf("violations %+v, want one orphan of process 1", r.Violations)
	}
	for name, h := range map[string]*hist{
		// The later node is of another session: the refusal's clean-up
		// may have failed with the session, which took the node.
		"later node on another session": orphanRun("a2", histories.DeletedByExpiry),
		// The client deleted the old node itself.
		"deleted by its client": orphanRun("a1", histories.DeletedByAcquire),
	} {
		if r := Liveness(h.ops(), bound); r.Verdict != Valid {
			t.Errorf("%s: %s (%s), want valid", name, r.Verdict, r.Explanation)
		}
	}
	// Without a definite refusal (the first acquire's outcome unknown, as
	// when one acquire made both nodes) no refusal broke its word.
	h := orphanRun("a1", histories.DeletedByExpiry)
	for i := range h.recs {
		if h.recs[i].Process == 1 && h.recs[i].Type == histories.Fail {
			h.recs[i].Type = histories.Info
		}
	}
	if r := Liveness(h.ops(), bound); r.Verdict != Valid {
		t.Errorf("no definite refusal: %s (%s), want valid", r.Verdict, r.Explanation)
	}
	// An orphan is judged whenever it was: in a run cut short before its
	// final heal too.
	invalidCutShort(t, orphanRun("a1", histories.DeletedByExpiry).ops(), 12000*ms)
}
