package checker

import (
	"strconv"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// lostWatchRun is WriteLock's lost watch (shayhatsor/zookeeper#26): c2
// holds node 10 until 1.5 s; c1, asking at 1 s with its requests slowed
// 0.3 s (0.5-1.55 s), listed the queue before 10 went and watched it
// after, and its node 11 headed the queue from 1.5 s (the observer's
// head_since: the deletion at revision 20) until its acquire was refused
// at 5 s, its node deleted then. Its wait is within the 7 s bound: only
// the unwoken rule tells the stall. c1End is how its acquire ended (the
// ret's type); more adds the deletion's extra params.
func lostWatchRun(c1End histories.Type, more ...string) *hist {
	h := (&hist{}).recorded(30, 1, 2).
		faultWith("slow", []string{"c1"}, map[string]string{"toxic": "latency", "latency": "300ms", "jitter": "0s", "link": "zookeeper"}, 500, 1550).
		event("heal", 29000, nil, nil).
		grant(2, 100, 200, 10, 10, "/l/lock/x-2-0000000010").rel(2, "lock", 1490, 1510, ok).
		deleted(1500, "c2", 10, 20, "release", "node", "x-2-0000000010", "lease", "b2", "process", "2").
		acq(1, "lock", 1000, 5000, c1End, 0).
		deleted(4990, "c1", 11, 30, "acquire", append([]string{"node", "x-1-0000000011", "lease", "a1", "process", "1", "head_since", "20"}, more...)...).
		grant(2, 1520, 5100, 12, 31, "/l/lock/x-2-0000000012").rel(2, "lock", 5200, 5300, ok).
		deleted(5250, "c2", 12, 32, "release", "node", "x-2-0000000012", "lease", "b2", "process", "2")
	return h.read(9, "x", 15000, 15001, ok, 0)
}

func TestLivenessUnwoken(t *testing.T) {
	const bound = 7 * time.Second
	r := Liveness(lostWatchRun(fail).ops(), bound)
	expect(t, r, Invalid, `Client c1 (process 1) asked for lock "lock" at 1.00 s; its node x-1-0000000011 (created at revision 11, never granted) headed the lock's queue from 1.50 s at the latest, when x-2-0000000010 went (revision 20)`,
		"it was refused at 5.00 s", "From 2.15 s to 4.99 s, 2.84s, no fault could reach its session")
	if len(r.Violations) != 1 || r.Violations[0].Kind != "unwoken" || r.Violations[0].Processes[0] != 1 {
		t.Errorf("violations %+v, want one unwoken of process 1", r.Violations)
	}
	// Ended unknown (the harness's deadline): the same, up to its end.
	expect(t, Liveness(lostWatchRun(info).ops(), bound), Invalid, "it ended without an answer at 5.00 s")
	// Judged whenever it was: in a run cut short before its heal too.
	invalidCutShort(t, lostWatchRun(fail).ops(), 0)
}

// A correct lock's head that was granted, however slowly, or whose stall
// a fault, its settling or locktest's own stall explains, is not unwoken.
func TestLivenessUnwokenExcused(t *testing.T) {
	const bound = 7 * time.Second
	// granted: c1 granted on node 11 at 3.4 s, 1.9 s after it headed the
	// queue (slow, but granted).
	granted := func() *hist {
		h := (&hist{}).recorded(30, 1, 2).
			grant(2, 100, 200, 10, 10, "/l/lock/x-2-0000000010").rel(2, "lock", 1490, 1510, ok).
			deleted(1500, "c2", 10, 20, "release", "node", "x-2-0000000010", "lease", "b2", "process", "2").
			grant(1, 1000, 3400, 11, 21, "/l/lock/x-1-0000000011").rel(1, "lock", 3500, 3600, ok).
			deleted(3550, "c1", 11, 30, "release", "node", "x-1-0000000011", "lease", "a1", "process", "1", "head_since", "20")
		return h.read(9, "x", 15000, 15001, ok, 0)
	}
	slowLatency := func(latency string) *hist {
		h := (&hist{}).recorded(30, 1, 2).
			faultWith("slow", []string{"c1"}, map[string]string{"toxic": "latency", "latency": latency, "jitter": "0s"}, 500, 1550)
		h.recs = append(h.recs, lostWatchRun(fail).recs[5:]...)
		return h
	}
	stalled := lostWatchRun(fail)
	stalled.event("stall", 3000, nil, map[string]string{"duration_ns": strconv.FormatInt(int64(300*time.Millisecond), 10)})
	for name, h := range map[string]*hist{
		"granted late": granted(),
		// c1's links cut 1.4-2.5 s: it may reconnect until 4.5 s.
		"its own cut": lostWatchRun(fail).fault("isolate", []string{"c1"}, 1400, 2500),
		// A member paused: every session may be slow to settle.
		"a member's pause": lostWatchRun(fail).fault("pause-member", []string{"m1"}, 2000, 2500),
		// A slow link past a quarter TTL: its pings may have timed out,
		// and the client reconnects within the TTL.
		"slow past a quarter TTL": slowLatency("600ms"),
		// locktest's own process not run for 0.3 s of the 2.84 s: the
		// host may have starved the lock's process longer.
		"locktest stalled": stalled,
		// Node 11 an earlier acquire's, left in line: the acquire waited
		// on its session's later node 13 (kazoo#732's, told as a ghost or
		// an orphan, not as a lost wake-up).
		"its session's later node": lostWatchRun(fail).
			deleted(4980, "c1", 13, 29, "acquire", "node", "x-1-0000000013", "lease", "a1", "process", "1"),
		// A history from before head_since.
		"no head_since": func() *hist {
			h := lostWatchRun(fail)
			for _, op := range h.recs {
				if op.F == "key-deleted" {
					delete(op.Value.Params, "head_since")
				}
			}
			return h
		}(),
	} {
		if r := Liveness(h.ops(), bound); r.Verdict == Invalid {
			t.Errorf("%s: invalid (%s)", name, r.Explanation)
		}
	}
	// A fault on another client cannot keep c1 from being woken.
	r := Liveness(lostWatchRun(fail).fault("pause-client", []string{"c2"}, 2000, 4000).ops(), bound)
	expect(t, r, Invalid, "x-1-0000000011", "faults active in its time at the head: ")
}
